/* input_files: the one list of every file this process reads, so that no output overwrites an input.
 *
 * Contract: every loader notes the file it reads (et_json_load_file for scenarios, profiles, plans,
 * overrides and measured files; histograms; platform files; token files; checkpoints; CSV tables), and a
 * tool notes, before it checks its outputs, the inputs it will read only later (a token file, a
 * checkpoint, the later scenarios of --compare). et_input_match() tells whether a path is one of them: the
 * same file (device and inode: whatever the spelling or links) as a noted input that exists. The list is
 * process-wide and grows only (a path noted twice is kept once); loaders run on the main thread. */
#ifndef ET_INPUT_FILES_H
#define ET_INPUT_FILES_H

/* Notes `path` (NULL or "" is ignored). Out of memory drops the note (that input is then unguarded). */
void et_input_note(const char *path);

/* The noted input that `path` is (the same file), or NULL when it is none, or does not exist. */
const char *et_input_match(const char *path);

#endif
