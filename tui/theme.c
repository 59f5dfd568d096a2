/* theme.c -- semantic colour roles with a monochrome fallback, and glyphs. */
#include "tui/ui.h"

#include <stdlib.h>
#include <string.h>

/* One row per role: colours for terminals that have them, attributes for
 * those that do not (or when NO_COLOR is set). -1 is the terminal's own
 * default colour, so the workbench sits on the user's background. */
typedef struct role_def {
    short fg, bg;
    attr_t color_attr;
    attr_t mono_attr;
} role_def;

static const role_def roles[TUI_NROLES] = {
    [TUI_R_NORMAL] = {-1, -1, A_NORMAL, A_NORMAL},
    [TUI_R_DIM] = {COLOR_BLUE, -1, A_BOLD, A_DIM},
    [TUI_R_BOLD] = {-1, -1, A_BOLD, A_BOLD},
    [TUI_R_HEADING] = {COLOR_CYAN, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [TUI_R_BORDER] = {COLOR_BLUE, -1, A_NORMAL, A_DIM},
    [TUI_R_BORDER_FOCUS] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
    [TUI_R_TITLE] = {COLOR_CYAN, -1, A_NORMAL, A_NORMAL},
    [TUI_R_TITLE_FOCUS] = {COLOR_BLACK, COLOR_CYAN, A_BOLD, A_REVERSE | A_BOLD},
    [TUI_R_CURSOR] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [TUI_R_CURSOR_DIM] = {-1, -1, A_REVERSE, A_UNDERLINE},
    [TUI_R_AWAITING] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, A_REVERSE | A_BOLD},
    [TUI_R_RUNNING] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [TUI_R_OK] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TUI_R_EDITED] = {COLOR_MAGENTA, -1, A_NORMAL, A_UNDERLINE},
    [TUI_R_REJECTED] = {COLOR_YELLOW, -1, A_NORMAL, A_DIM},
    [TUI_R_FAIL] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [TUI_R_ADD] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TUI_R_DEL] = {COLOR_RED, -1, A_NORMAL, A_DIM},
    [TUI_R_ADD_WORD] = {COLOR_BLACK, COLOR_GREEN, A_NORMAL, A_REVERSE},
    [TUI_R_DEL_WORD] = {COLOR_BLACK, COLOR_RED, A_NORMAL, A_REVERSE | A_DIM},
    [TUI_R_HUNK] = {COLOR_CYAN, -1, A_NORMAL, A_BOLD},
    [TUI_R_LINENO] = {COLOR_BLUE, -1, A_NORMAL, A_DIM},
    [TUI_R_MARK] = {COLOR_BLACK, COLOR_YELLOW, A_NORMAL, A_REVERSE},
    [TUI_R_ERROR] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [TUI_R_WARNING] = {COLOR_YELLOW, -1, A_NORMAL, A_BOLD},
    [TUI_R_NOTE] = {COLOR_CYAN, -1, A_NORMAL, A_NORMAL},
    [TUI_R_LINK] = {COLOR_MAGENTA, -1, A_UNDERLINE, A_UNDERLINE},
    [TUI_R_PLOT] = {COLOR_CYAN, -1, A_NORMAL, A_NORMAL},
    [TUI_R_POINT] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [TUI_R_BASE_POINT] = {COLOR_MAGENTA, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [TUI_R_BAR] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TUI_R_STATUS] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [TUI_R_STATUS_KEY] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [TUI_R_STATUS_ALERT] = {COLOR_WHITE, COLOR_RED, A_BOLD, A_REVERSE | A_BOLD},
    [TUI_R_SEARCH] = {COLOR_BLACK, COLOR_YELLOW, A_NORMAL, A_REVERSE | A_UNDERLINE},
    [TUI_R_PROMPT] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, A_REVERSE},
};

static int use_color;

void tui_theme_init(void)
{
    const char *nc = getenv("NO_COLOR");
    use_color = has_colors() && (nc == NULL || *nc == '\0');
    if (!use_color)
        return;
    start_color();
    use_default_colors();
    for (int r = 0; r < TUI_NROLES; r++)
        init_pair((short)(r + 1), roles[r].fg, roles[r].bg);
}

int tui_theme_color(void)
{
    return use_color;
}

attr_t tui_attr(int role)
{
    if (role < 0 || role >= TUI_NROLES)
        role = TUI_R_NORMAL;
    return use_color ? roles[role].color_attr : roles[role].mono_attr;
}

short tui_pair(int role)
{
    if (role < 0 || role >= TUI_NROLES || !use_color)
        return 0;
    return (short)(role + 1);
}

const char *tui_glyph_status(const char *status, int utf8, int spin)
{
    static const char *spin_u[] = {"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"};
    static const char *spin_a[] = {"|", "/", "-", "\\"};
    if (dt_streq(status, "running"))
        return utf8 ? spin_u[spin % 10] : spin_a[spin % 4];
    if (dt_streq(status, "awaiting review"))
        return utf8 ? "◆" : "?";
    if (dt_streq(status, "approved"))
        return utf8 ? "✓" : "+";
    if (dt_streq(status, "edited"))
        return utf8 ? "✎" : "e";
    if (dt_streq(status, "rejected"))
        return utf8 ? "✗" : "x";
    if (dt_streq(status, "failed"))
        return "!";
    if (dt_streq(status, "skipped"))
        return "-";
    return " ";
}
