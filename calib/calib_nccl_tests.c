/* The output of nccl-tests' all_reduce_perf, as it prints it, read into all-reduce samples. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_csv.h"
#include "calib_network.h"
#include "input_files.h"

#define MAX_HOSTS 4096

/* "#  Rank  3 Group  0 Pid 1234 on   node-1 device  3 [0x07] NVIDIA A100-SXM4-80GB": the host and the
 * device's name; 0 when the line is no rank line. */
static int rank_line(const char *line, char *host, size_t hsize, char *device, size_t dsize)
{
    int r, g, pid;
    char h[256];
    if (sscanf(line, "# Rank %d Group %d Pid %d on %255s", &r, &g, &pid, h) != 4) return 0;
    snprintf(host, hsize, "%s", h);
    const char *close = strchr(line, ']');
    snprintf(device, dsize, "%s", close ? close + 1 + strspn(close + 1, " ") : "");
    device[strcspn(device, "\r\n")] = 0;
    return 1;
}

int calib_nccl_tests_is_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int found = 0;
    for (int i = 0; i < 20 && !found && fgets(line, sizeof line, f); i++)
        found = strncmp(line, "# nThread", 9) == 0 || strstr(line, "Collective test starting") != NULL;
    fclose(f);
    return found;
}

int calib_nccl_tests_load(const char *path, const char *gpu_filter, calib_coll_sample **out, int *n,
                          et_error *err)
{
    *out = NULL, *n = 0;
    et_input_note(path);
    FILE *f = fopen(path, "r");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open the nccl-tests output");
    char line[2048], host[256], device[256], gpu[256] = "";
    static char hosts[MAX_HOSTS][64];
    int ranks = 0, n_hosts = 0, other = 0, lineno = 0, cap = 0, rc = 0;
    calib_coll_sample *x = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (strstr(line, "Collective test starting") && !strstr(line, "all_reduce")) other = 1;
        if (rank_line(line, host, sizeof host, device, sizeof device)) {
            ranks++;
            if (!gpu[0]) snprintf(gpu, sizeof gpu, "%s", device);
            int known = 0;
            for (int h = 0; h < n_hosts && !known; h++)
                known = !strcmp(hosts[h], host);
            if (!known && n_hosts < MAX_HOSTS) snprintf(hosts[n_hosts++], sizeof hosts[0], "%.63s", host);
            continue;
        }
        if (line[0] == '#') continue;
        /* size count type redop root time algbw busbw #wrong ... (out-of-place first) */
        double size, count, time_us, algbw, busbw;
        char type[32], redop[32], root[32];
        if (sscanf(line, "%lf %lf %31s %31s %31s %lf %lf %lf", &size, &count, type, redop, root, &time_us,
                   &algbw, &busbw) != 8) {
            if (strspn(line, " \t\r\n") != strlen(line) && ranks > 0) {
                rc = et_error_set(err, path, lineno, 1, NULL,
                                  "not an nccl-tests result row (size count type redop root time algbw busbw "
                                  "#wrong ... expected)");
                break;
            }
            continue;
        }
        if (!strcmp(redop, "none") || strcmp(root, "-1") != 0) other = 1; /* a gather, broadcast, ... */
        if (size <= 0 || !(time_us > 0)) continue;
        if (*n == cap) {
            calib_coll_sample *grown = realloc(x, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *grown);
            if (!grown) {
                rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
                break;
            }
            x = grown;
        }
        x[(*n)++] = (calib_coll_sample){0, 0, size, time_us * 1e-6};
    }
    fclose(f);
    if (!rc && other)
        rc = et_error_set(err, path, 0, 0, NULL, "not an all_reduce_perf run (fit-network fits all-reduces)");
    if (!rc && ranks < 2)
        rc = et_error_set(err, path, 0, 0, NULL,
                          "no '#  Rank N ... on HOST device D [bus] NAME' lines for two ranks or more: the "
                          "output's head is needed to know the GPUs and nodes");
    if (!rc && ranks % n_hosts != 0)
        rc = et_error_set(err, path, 0, 0, NULL, "%d ranks on %d hosts: not the same number on each", ranks,
                          n_hosts);
    if (!rc && gpu_filter && strcmp(gpu_filter, "any") != 0 && !calib_csv_gpu_matches(gpu, gpu_filter))
        rc = et_error_set(err, path, 0, 0, NULL, "the run's GPUs are \"%s\", not \"%s\"", gpu, gpu_filter);
    if (!rc && *n == 0) rc = et_error_set(err, path, 0, 0, NULL, "no result rows");
    if (rc) {
        free(x);
        *n = 0;
        return -1;
    }
    for (int i = 0; i < *n; i++)
        x[i].nodes = n_hosts, x[i].per_node = ranks / n_hosts;
    *out = x;
    return 0;
}
