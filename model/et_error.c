#include "et_error.h"

#include <stdarg.h>
#include <string.h>

void et_error_clear(et_error *err)
{
    memset(err, 0, sizeof *err);
}

const char *const et_error_code_names[] = {"none", "input", "infeasible", "io", "memory", "internal", NULL};

static void fill(et_error *err, et_error_code code, const char *source, int line, int column,
                 const char *path, const char *fmt, va_list ap)
{
    et_error_clear(err);
    err->code = code;
    snprintf(err->source, sizeof err->source, "%s", source ? source : "");
    err->line = line;
    err->column = column;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    vsnprintf(err->text, sizeof err->text, fmt, ap);
}

int et_error_set_code(et_error *err, et_error_code code, const char *source, int line, int column,
                      const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, code, source, line, column, path, fmt, ap);
    va_end(ap);
    return -1;
}

int et_error_exit_status(const et_error *err)
{
    return err->code == ET_ERROR_INPUT ? 2 : err->code == ET_ERROR_INFEASIBLE ? 3 : 1;
}

int et_error_set(et_error *err, const char *source, int line, int column, const char *path, const char *fmt,
                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, ET_ERROR_INPUT, source, line, column, path, fmt, ap);
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
