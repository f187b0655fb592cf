package cli

import "strings"

// helpWidth is the width help text is wrapped to.
const helpWidth = 78

// BackendHelp is the help of the flags that name a command's lock store,
// worded alike in every command: --backend URL, the command's older name
// for it (alias, "" if none) and --backend-file. Descriptions start at
// column col; store says what the store is for and which URLs the
// command takes, deflt what it uses when neither a flag nor
// $TURNSTILE_BACKEND names one.
func BackendHelp(col int, store, deflt, alias string) string {
	var b strings.Builder
	HelpItem(&b, col, "--backend URL", "the lock store: "+store+". Default: $"+BackendEnv+", else "+deflt+
		". Every local user can read a command line (ps): keep a URL with a password in $"+BackendEnv+
		" or --backend-file, or the password alone in a file named by password_file= in the URL. TLS: ca_file=, cert_file=,"+
		" key_file= and server_name= in the URL (docs/security.md). Output and errors show it with the password masked.")
	if alias != "" {
		HelpItem(&b, col, "--"+alias+" URL", "the same as --backend (an older name, kept for scripts)")
	}
	HelpItem(&b, col, "--backend-file FILE", "read the --backend URL from FILE (its one line, spaces trimmed), e.g. a file only you can read")
	return b.String()
}

// HelpItem writes one flag's help: "  NAME" and its description from
// column col (on the next line if NAME reaches it), wrapped at the help
// width.
func HelpItem(b *strings.Builder, col int, name, desc string) {
	line := "  " + name
	if len(line)+2 > col {
		b.WriteString(line + "\n")
		line = ""
	}
	line += strings.Repeat(" ", col-len(line))
	indent := strings.Repeat(" ", col)
	fresh := true
	for _, w := range strings.Fields(desc) {
		if !fresh && len(line)+1+len(w) > helpWidth {
			b.WriteString(line + "\n")
			line, fresh = indent, true
		}
		if !fresh {
			line += " "
		}
		line += w
		fresh = false
	}
	b.WriteString(line + "\n")
}
