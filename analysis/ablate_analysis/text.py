"""Users' strings in what ablate-report writes. A spec's description, run and configuration
names (a grid value is any string), messages, paths, provenance and samples come from users
and their data; each must read as the text it is:

  - in Markdown (report.md, compare.md), raw HTML passes through to the rendered page (a
    description "<script>" or "<img ...>" would become part of it), a line end ends a table
    row or a heading, a backtick can close a code span early;
  - on a terminal, a control character (an ESC sequence) recolours, moves the cursor or
    retitles the window: shown escaped, as ablate's own text_escape shows it
    (src/util/json.h: `ablate plan`, `inspect`, `run`, `train`).

The page (report.html) needs none of this: it puts every string in with textContent, and
page.script_json keeps the embedded JSON inert."""

import re

# C0 but tab and line ends (each handled where it matters), DEL, C1
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _control_escape(m):
    return "\\u%04x" % ord(m.group(0))


def term_text(s):
    """s for a terminal, as text_escape shows it: control characters (C0, DEL, C1) as
    \\u00XX, line ends and tabs as \\n \\r \\t."""
    s = str(s).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return _CONTROLS.sub(_control_escape, s)


def text_lines(s):
    """Text shown as lines (a sample in a fenced block): term_text but \\n and \\t kept."""
    return _CONTROLS.sub(_control_escape, str(s).replace("\r", "\\r"))


def fig_text(s):
    """A user's string as a matplotlib label: term_text, and "$" escaped (two of them would
    start mathtext, which fails on most text)."""
    return term_text(s).replace("$", "\\$")


_MD_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": " ", "\n": " "})


def md_text(s):
    """A user's string as Markdown text that shows it as written, on one line: & < > as
    entities, line ends as blanks, other control characters as \\u00XX."""
    return _CONTROLS.sub(_control_escape, str(s).translate(_MD_ESCAPES))


class Md(str):
    """Text that is Markdown already (a code span, a generated "> 100,000"): a table cell
    (report.cell) keeps it as it is, only | and line ends made safe."""


def md_code(s):
    """A user's string as a Markdown code span (raw HTML is literal there), on one line, its
    backtick fence longer than any run of backticks in it (CommonMark's rule), padded with a
    blank where the text starts or ends with a backtick."""
    s = _CONTROLS.sub(_control_escape, str(s).replace("\r", " ").replace("\n", " "))
    longest = max((len(r) for r in re.findall("`+", s)), default=0)
    tick = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return Md("%s%s%s%s%s" % (tick, pad, s, pad, tick))


_TICKS = re.compile("`+")


def md_prose(s):
    """A sentence made of fixed text, code spans (md_code) and users' strings: md_text
    outside the code spans, the spans as they are. A span is a run of n backticks up to
    the next run of exactly n (CommonMark); a run without its match is text."""
    s = str(s)
    out, i = [], 0
    pos = 0  # where the text not yet written starts
    while True:
        m = _TICKS.search(s, i)
        if not m:
            break
        n = len(m.group(0))
        close = next((c for c in _TICKS.finditer(s, m.end()) if len(c.group(0)) == n), None)
        if close is None:
            i = m.end()
            continue
        out.append(md_text(s[pos:m.start()]))
        out.append(s[m.start():close.end()].replace("\n", " "))
        pos = i = close.end()
    out.append(md_text(s[pos:]))
    return Md("".join(out))
