/* Stand-in for Zephyr's shell/shell.h (see ../../README.md). Zephyr's command tables are sections
 * of its own structures; here stub_ structures keep the types the module relies on. */
#ifndef STUB_ZEPHYR_SHELL_H
#define STUB_ZEPHYR_SHELL_H
#include <stddef.h>

struct shell;
typedef int (*shell_cmd_handler)(const struct shell *sh, size_t argc, char **argv);
struct stub_shell_subcmds;
struct stub_shell_cmd {
    const char *syntax;
    const struct stub_shell_subcmds *subcmd;
    const char *help;
    shell_cmd_handler handler;
    unsigned mandatory, optional;
};
struct stub_shell_subcmds {
    const struct stub_shell_cmd *cmds;
};

void stub_shell_fprintf(const struct shell *sh, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define shell_print(sh, fmt, ...) stub_shell_fprintf(sh, 0, fmt "\n", ##__VA_ARGS__)
#define shell_error(sh, fmt, ...) stub_shell_fprintf(sh, 1, fmt "\n", ##__VA_ARGS__)

#define SHELL_CMD_ARG(syntax, subcmd, help, handler, mand, opt) {#syntax, subcmd, help, handler, mand, opt}
#define SHELL_CMD(syntax, subcmd, help, handler) SHELL_CMD_ARG(syntax, subcmd, help, handler, 0, 0)
#define SHELL_SUBCMD_SET_END {0}
#define SHELL_STATIC_SUBCMD_SET_CREATE(name, ...)                                                 \
    static const struct stub_shell_cmd name##_entries[] = {__VA_ARGS__};                               \
    static const struct stub_shell_subcmds name = {name##_entries}
#define SHELL_CMD_REGISTER(syntax, subcmd, help, handler)                                         \
    const struct stub_shell_cmd stub_shell_root_##syntax = SHELL_CMD(syntax, subcmd, help, handler)
#endif
