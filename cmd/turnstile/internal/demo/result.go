//go:build unix

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// A result is the verdict of one run of one variant of a scenario.
type result struct {
	Scenario string
	Variant  string
	// OK reports whether the run kept the scenario's promise (no oversell,
	// one charge, one rider per order, ...).
	OK bool
	// Naive marks the code without turnstile, which is expected to go wrong.
	Naive bool
	// Summary says in words what happened, with the figures that matter.
	Summary string
	// Figures are the measured values, in the order they are printed.
	Figures []figure
}

// A figure is one named measurement of a run.
type figure struct {
	Name  string
	Value any
}

func (r *result) add(name string, value any) {
	r.Figures = append(r.Figures, figure{name, value})
}

// jsonLine renders the result as one JSON object with a fixed key order:
// scenario, variant, ok, naive, summary, then the figures.
func (r *result) jsonLine() string {
	var b bytes.Buffer
	b.WriteByte('{')
	put := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(marshalPlain(k))
		b.WriteByte(':')
		b.Write(marshalPlain(v))
	}
	put("scenario", r.Scenario)
	put("variant", r.Variant)
	put("ok", r.OK)
	put("naive", r.Naive)
	put("summary", r.Summary)
	for _, f := range r.Figures {
		put(f.Name, f.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// marshalPlain is json.Marshal without HTML escaping, so that "token 1 <
// 2" stays readable.
func marshalPlain(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.Reset()
		_ = enc.Encode(fmt.Sprint(v))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// verdict is the table's word for the result.
func (r *result) verdict() string {
	if r.OK {
		return "ok"
	}
	return "WRONG"
}

// writeTable prints one row per run.
func writeTable(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tVARIANT\tVERDICT\tWHAT HAPPENED")
	last := ""
	for _, r := range rs {
		name := r.Scenario
		if name == last {
			name = ""
		}
		last = r.Scenario
		summary := r.Summary
		if r.Naive {
			summary = "naive: " + summary
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, r.Variant, r.verdict(), summary)
	}
	_ = tw.Flush()
}

// countFailure counts a failed attempt in n and keeps the first
// failure's error in first, for the summary.
func countFailure[T ~int | ~int64](n *T, first *string, err error) {
	*n++
	if *first == "" {
		*first = err.Error()
	}
}

// firstError adds the first failure's error to the summary, if there was
// one.
func (r *result) firstError(first string) {
	if first != "" {
		r.Summary += "; first error: " + first
	}
}

// runVariants runs each of a scenario's variants in turn with run, and
// returns their results; an error ends the scenario, named by its
// variant.
func runVariants(ctx context.Context, env *environment, variants []string, run func(context.Context, *environment, string) (result, error)) ([]result, error) {
	var rs []result
	for _, v := range variants {
		r, err := run(ctx, env, v)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", v, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// num formats an integer with thousands separators: 2,847 and -2,847.
func num[T ~int | ~int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	if len(digits) < len(s) {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
