#include "et_error.h"

#include <stdarg.h>
#include <string.h>

void et_error_clear(et_error *err)
{
    memset(err, 0, sizeof *err);
}

int et_error_set(et_error *err, const char *source, int line, int column, const char *path, const char *fmt,
                 ...)
{
    et_error_clear(err);
    snprintf(err->source, sizeof err->source, "%s", source ? source : "");
    err->line = line;
    err->column = column;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return -1;
}

void et_error_print(FILE *out, const et_error *err)
{
    if (err->source[0]) {
        fputs(err->source, out);
        if (err->line > 0) fprintf(out, ":%d", err->line);
        if (err->line > 0 && err->column > 0) fprintf(out, ":%d", err->column);
        fputs(": ", out);
    }
    if (err->path[0]) fprintf(out, "%s: ", err->path);
    fprintf(out, "%s\n", err->text);
}
