package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// allCommands is commands, read by "turnstile completion" (which is one
// of them: set in init, so that the list does not depend on itself).
var allCommands []command

func init() { allCommands = commands }

// completionShells are the shells "turnstile completion" writes scripts
// for, with the function that writes each.
var completionShells = []struct {
	name  string
	write func(io.Writer, []cmdSpec)
}{
	{"bash", writeBash},
	{"zsh", writeZsh},
	{"fish", writeFish},
}

// cmdSpec is what a completion script knows of one command.
type cmdSpec struct {
	name, summary string
	flags         []string // "--backend", ...
}

// flagLine matches a flag at the start of a line of a command's help, as
// every command writes its flags: "  --backend URL  the lock store".
var flagLine = regexp.MustCompile(`(?m)^ {2,4}(--[a-z][a-z0-9-]*)`)

// specs reads the commands and, from each command's help, its flags: a
// command or a flag added to turnstile appears in the scripts without
// more work, as long as its help lists it as the others do.
func specs(ctx context.Context) []cmdSpec {
	var out []cmdSpec
	for _, c := range allCommands {
		var help bytes.Buffer
		c.run(ctx, []string{"-h"}, &help, io.Discard)
		var flags []string
		for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
			if !slices.Contains(flags, m[1]) {
				flags = append(flags, m[1])
			}
		}
		out = append(out, cmdSpec{name: c.name, summary: c.summary, flags: flags})
	}
	return append(out, cmdSpec{name: "help", summary: "show the commands, or one command's flags"})
}

// completionCmd implements "turnstile completion SHELL".
func completionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("completion")
	err := fs.Parse(args)
	var write func(io.Writer, []cmdSpec)
	if err == nil {
		switch fs.NArg() {
		case 0:
			err = errors.New("name the shell: bash, zsh or fish")
		case 1:
			for _, s := range completionShells {
				if s.name == fs.Arg(0) {
					write = s.write
				}
			}
			if write == nil {
				err = fmt.Errorf("unknown shell %s: want bash, zsh or fish", cli.QuoteArg(fs.Arg(0)))
			}
		default:
			err = fmt.Errorf("unexpected argument %s after the shell", cli.QuoteArg(fs.Arg(1)))
		}
	}
	if code, done := cli.FlagsDone("completion", err, func() string { return completionUsage }, stdout, stderr); done {
		return code
	}
	write(stdout, specs(ctx))
	return exitOK
}

const completionUsage = `Usage: turnstile completion bash|zsh|fish

Print a script that makes SHELL complete turnstile's commands and their
flags, and the command after "turnstile run ... --". Load it:

  bash  source <(turnstile completion bash)       (in ~/.bashrc)
  zsh   source <(turnstile completion zsh)        (in ~/.zshrc, after compinit)
  fish  turnstile completion fish > ~/.config/fish/completions/turnstile.fish

The script is written from this binary's commands and flags: load it again
after an upgrade.

Exit status:
  0   printed
  64  usage error: no shell, or one turnstile has no script for
`

// names returns the command names of specs, space-separated.
func names(specs []cmdSpec) string {
	n := make([]string, len(specs))
	for i, s := range specs {
		n[i] = s.name
	}
	return strings.Join(n, " ")
}

func writeBash(w io.Writer, specs []cmdSpec) {
	fmt.Fprintf(w, `# bash completion for turnstile; load with: source <(turnstile completion bash)
_turnstile() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
        --)
            # After "--" come no flags: for run the command to run under
            # the lock and its arguments, for the others their arguments
            # (file names, as bash offers by default).
            COMPREPLY=()
            if [[ $cmd == run ]]; then
                if ((i + 1 == COMP_CWORD)); then
                    # compgen -c lists a name once per place it is found
                    # (builtin, /bin, /usr/bin).
                    COMPREPLY=($(compgen -c -- "$cur" | sort -u))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
            fi
            return 0
            ;;
        -*) ;;
        *) [[ -z $cmd ]] && cmd="${COMP_WORDS[i]}" ;;
        esac
    done
    local words=""
    case "$cmd" in
    "") words="%s --help --version" ;;
    help) words="%s" ;;
    completion) words="bash zsh fish" ;;
`, names(specs), names(specs))
	for _, s := range specs {
		if len(s.flags) > 0 {
			fmt.Fprintf(w, "    %s) [[ $cur == -* ]] && words=\"%s --help\" ;;\n", s.name, strings.Join(s.flags, " "))
		}
	}
	fmt.Fprint(w, `    esac
    if [[ -n $words ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    return 0
}
complete -o default -o bashdefault -F _turnstile turnstile
`)
}

// zshQuote quotes s for a zsh single-quoted word.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeZsh(w io.Writer, specs []cmdSpec) {
	fmt.Fprint(w, `#compdef turnstile
# zsh completion for turnstile; load with: source <(turnstile completion zsh)
_turnstile() {
    local -a cmds
    cmds=(
`)
	for _, s := range specs {
		fmt.Fprintf(w, "        %s\n", zshQuote(strings.ReplaceAll(s.name+":"+s.summary, "\n", " ")))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        if [[ $PREFIX == -* ]]; then
            compadd -- --help --version
        else
            _describe -t commands 'turnstile command' cmds
        fi
        return
    fi
    local sep=${words[(i)--]}
    if (( sep < CURRENT )); then
        # After "--" come no flags: for run the command to run under the
        # lock and its arguments, for the others their arguments.
        if [[ $words[2] == run ]]; then
            shift $sep words
            (( CURRENT -= sep ))
            _normal
        else
            _files
        fi
        return
    fi
    case $words[2] in
    help) _describe -t commands 'turnstile command' cmds ;;
    completion) compadd -- bash zsh fish ;;
`)
	for _, s := range specs {
		if len(s.flags) > 0 {
			fmt.Fprintf(w, "    %s) if [[ $PREFIX == -* ]]; then compadd -- %s --help; else _files; fi ;;\n", s.name, strings.Join(s.flags, " "))
		}
	}
	fmt.Fprint(w, `    *) _files ;;
    esac
}
if [[ $funcstack[1] == _turnstile ]]; then
    _turnstile "$@"
else
    compdef _turnstile turnstile
fi
`)
}

// fishQuote quotes s for a fish single-quoted string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`, "\n", " ").Replace(s) + "'"
}

func writeFish(w io.Writer, specs []cmdSpec) {
	fmt.Fprintf(w, `# fish completion for turnstile; save as ~/.config/fish/completions/turnstile.fish
complete -c turnstile -f
complete -c turnstile -n __fish_use_subcommand -l help -d 'show the commands'
complete -c turnstile -n __fish_use_subcommand -l version -d 'print the version'
`)
	for _, s := range specs {
		fmt.Fprintf(w, "complete -c turnstile -n __fish_use_subcommand -a %s -d %s\n", s.name, fishQuote(s.summary))
	}
	for _, s := range specs {
		for _, f := range s.flags {
			fmt.Fprintf(w, "complete -c turnstile -n '__fish_seen_subcommand_from %s; and not contains -- -- (commandline -opc)' -l %s\n", s.name, strings.TrimPrefix(f, "--"))
		}
	}
	fmt.Fprintf(w, `complete -c turnstile -n '__fish_seen_subcommand_from help' -a %s
complete -c turnstile -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'
complete -c turnstile -n '__fish_seen_subcommand_from run; and contains -- -- (commandline -opc)' -F -a '(__fish_complete_command)'
`, fishQuote(names(specs)))
}
