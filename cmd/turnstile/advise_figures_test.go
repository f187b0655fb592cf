package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// readDoc is a page of the docs, its whitespace runs made single spaces
// so that a quote may be found across the page's line breaks.
func readDoc(t *testing.T, doc string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// shownValue reads a figure as the docs write it: 14.5, 1,000, 10k, 70 %.
func shownValue(s string) (float64, error) {
	scale := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		s, scale = strings.TrimSuffix(s, "k"), 1e3
	case strings.HasSuffix(s, " %"):
		s, scale = strings.TrimSuffix(s, " %"), 0.01
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return v * scale, err
}

// Every figure the advisor sizes with is the one the docs show: a change
// to either fails here until the other follows.
func TestAdviseFiguresInDocs(t *testing.T) {
	t.Parallel()
	docs := map[string]string{}
	for _, f := range adviseFigures {
		if docs[f.doc] == "" {
			docs[f.doc] = readDoc(t, f.doc)
		}
		quote := strings.Join(strings.Fields(f.quote), " ")
		if !strings.Contains(docs[f.doc], quote) {
			t.Errorf("%s does not say %q: write the figure %v there, or change the advisor's", f.doc, f.quote, f.value)
			continue
		}
		v, err := shownValue(f.shown)
		if err != nil || !strings.Contains(quote, f.shown) || math.Abs(v-f.value) > 1e-9*f.value {
			t.Errorf("%s shows %q in %q, %v; the advisor uses %v", f.doc, f.shown, f.quote, err, f.value)
		}
	}
	// What derives from the figures and from turnstile's own defaults.
	cli := readDoc(t, cliAdvise)
	for _, want := range []string{
		fmt.Sprintf("within one ensemble (~%s/s)", thousands(consensusWrites/writesPerAcquisition)),
		"holds longer than a third of the default TTL",
	} {
		if !strings.Contains(cli, want) {
			t.Errorf("%s does not say %q", cliAdvise, want)
		}
	}
	if renewEvery != turnstile.DefaultTTL/3 || documentedCost().dbRate != tableDB {
		t.Errorf("renewals every %v for a default TTL of %v; a database at %v/s", renewEvery, turnstile.DefaultTTL, documentedCost().dbRate)
	}
	if got := phase1TTL(time.Millisecond); got != phase1MinTTL {
		t.Errorf("phase 1's TTL for a 1ms hold is %v, want the least, %v", got, phase1MinTTL)
	}
}

// The rows of the load table the advisor picks from are the rows of the
// docs' table, bounds included.
func TestAdviseTableInDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/backends.md")
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range tableRows {
		if !strings.Contains(string(b), "\n"+r.markdown()+"\n") {
			t.Errorf("docs/backends.md's load table has no row %q (%s)", r.markdown(), id)
		}
	}
}
