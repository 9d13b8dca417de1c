package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes text that came from users (actors, reasons, messages, lease holders) safe to show on
// a terminal, in a log or in Markdown: every character that is not printable is written as a
// visible escape, so that none can move the cursor, clear the screen, start a new line that forges
// an entry, or reorder what is shown. Newline, carriage return and tab become \n, \r and \t; other
// C0 controls and DEL become \xNN (ESC is \x1b, so an ANSI sequence shows as text); C1 controls,
// line and paragraph separators and invisible format characters (bidirectional overrides,
// zero-width characters) become \uNNNN; a byte that is not UTF-8 becomes \xNN. Printable text in
// any script, spaces and backslashes stay as they are, so Escape(Escape(s)) == Escape(s).
func Escape(s string) string {
	i := strings.IndexFunc(s, needsEscape)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < utf8.RuneSelf && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xFFFF && needsEscape(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether r is not printable text: a control or format character, a line or
// paragraph separator, a private or unassigned code point, or the replacement for a byte that is
// not UTF-8 (strings.IndexFunc passes that as utf8.RuneError).
func needsEscape(r rune) bool {
	return r == utf8.RuneError || !unicode.IsGraphic(r)
}
