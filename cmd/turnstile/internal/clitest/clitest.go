// Package clitest holds what the tests of turnstile's commands share: the
// checks of the fuzz tests of their command-line parsers.
package clitest

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// SplitArgs turns a fuzz input into a command line: arguments separated by
// NUL, which no argument can contain.
func SplitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

var quotedArg = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// NamesBadPart reports whether a usage error points at the input: it names
// one of flags, quotes part of an argument (as given, or as cli.MaskURL
// shows it), or says what is missing.
func NamesBadPart(msg string, args, flags []string) bool {
	for _, f := range flags {
		if strings.Contains(msg, "-"+f) {
			return true
		}
	}
	for _, q := range quotedArg.FindAllString(msg, -1) {
		if s, err := strconv.Unquote(q); err == nil && slices.ContainsFunc(args, func(a string) bool {
			return strings.Contains(a, s) || strings.Contains(cli.MaskURL(a), s)
		}) {
			return true
		}
	}
	if strings.HasPrefix(msg, "missing ") {
		return true // says what is missing
	}
	// flag's own messages: "flag provided but not defined: -x", "flag
	// needs an argument: -x", "bad flag syntax: ---x" (the argument as
	// given, "-=" too).
	return strings.Contains(msg, "flag") && slices.ContainsFunc(args, func(a string) bool {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return name != "" && strings.Contains(msg, "-"+name) || strings.HasSuffix(msg, "bad flag syntax: "+a)
	})
}
