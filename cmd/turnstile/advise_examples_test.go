package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// adviseOutput is what "turnstile advise" prints for args: its --json
// as plain JSON values, and its table.
type adviseOutput struct {
	json map[string]any
	text string
}

func runAdviseBoth(t *testing.T, args ...string) adviseOutput {
	t.Helper()
	j := runAdvise(t, append(args, "--json")...)
	txt := runAdvise(t, args...)
	if j.code != exitOK || txt.code != exitOK {
		t.Fatalf("advise %q: exit codes %d, %d; stderr:\n%s%s", args, j.code, txt.code, j.stderr, txt.stderr)
	}
	var o adviseOutput
	if err := json.Unmarshal([]byte(j.stdout), &o.json); err != nil {
		t.Fatalf("advise %q --json: %v", args, err)
	}
	o.text = txt.stdout
	return o
}

// field is the value at path in the JSON, nil when it is missing.
func (o adviseOutput) field(path ...string) any {
	var v any = o.json
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func (o adviseOutput) number(path ...string) float64 {
	f, _ := o.field(path...).(float64)
	return f
}

// presetURLs are every URL the preset gives, the primaries of fallback
// URLs in their place.
func (o adviseOutput) presetURLs() []string {
	var urls []string
	add := func(u string) {
		if u == "" || strings.Contains(strings.Join(urls, " "), u) {
			return
		}
		if p, ok := strings.CutPrefix(u, "fallback://?primary="); ok {
			u, _, _ = strings.Cut(p, "&")
		}
		urls = append(urls, u)
	}
	if l, ok := o.field("preset", "urls").([]any); ok {
		for _, u := range l {
			s, _ := u.(string)
			add(s)
		}
	}
	s, _ := o.field("preset", "url").(string)
	add(s)
	return urls
}

// fitsAgree fails t unless the table says what --json's fits does.
func (o adviseOutput) fitsAgree(t *testing.T) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ +fits +(yes|no)\b`).FindStringSubmatch(o.text)
	fits, _ := o.field("capacity", "fits").(bool)
	if m == nil || (m[1] == "yes") != fits {
		t.Errorf("--json says fits: %v; the table says %q:\n%s", fits, m, o.text)
	}
}

// The loads of the examples in advise -h and the docs give advice whose
// every figure follows from the others. Checked on the output alone.
func TestAdviseExamplesConsistent(t *testing.T) {
	t.Parallel()

	t.Run("money with a database and Kafka", func(t *testing.T) {
		o := runAdviseBoth(t, "--rate", "30k", "--hold", "20ms", "--safety", "money", "--stores", "redis,postgres,kafka")
		o.fitsAgree(t)
		if groups := o.number("capacity", "groups"); float64(len(o.presetURLs())) != groups {
			t.Errorf("capacity counts %v Redlocks; the preset gives %q", groups, o.presetURLs())
		}
		if url, _ := o.field("preset", "url").(string); strings.HasPrefix(url, "fallback://") {
			if o.number("capacity", "failover", "per_group_rate") < o.number("capacity", "requests_per_s") || o.number("capacity", "requests_per_s") == 0 {
				t.Errorf("a fallback whose database does not carry the load an outage moves to it: %v", o.field("capacity"))
			}
		}
	})

	t.Run("a hot item's stock", func(t *testing.T) {
		o := runAdviseBoth(t, "--rate", "200k", "--operation", "stock-decrement", "--hot-key-share", "40%")
		o.fitsAgree(t)
		if held := o.number("capacity", "locks_held"); held != 0 || strings.Contains(o.text, "locks held") {
			t.Errorf("a design without locks holds %v of them:\n%s", held, o.text)
		}
		// The hot item lives on one server: it must carry it.
		if hot, per := o.number("capacity", "hot_key_rate"), o.number("capacity", "per_group_rate"); hot > per {
			t.Errorf("the hottest item takes %v/s on one server, which carries %v/s", hot, per)
		}
	})

	t.Run("a long hold on one key", func(t *testing.T) {
		o := runAdviseBoth(t, "--rate", "5", "--hold", "1h", "--hot-key-share", "100%")
		o.fitsAgree(t)
		if m := regexp.MustCompile(`(^|[^0-9.,])0( times a second|/s| acquisitions/s)`).FindString(o.text); m != "" {
			t.Errorf("a positive rate printed as %q:\n%s", m, o.text)
		}
	})

	t.Run("the largest rate", func(t *testing.T) {
		o := runAdviseBoth(t, "--rate", "1000M")
		o.fitsAgree(t)
		if m := regexp.MustCompile(`[0-9]+\.[0-9]+ Redlock`).FindString(o.text); m != "" {
			t.Errorf("a count of Redlocks that is no whole number: %q", m)
		}
	})

	// A measured server that carries ~54,000/s at the headroom carries
	// 50,000/s: the table's 10,000 for a server not measured does not
	// overrule the measurement.
	t.Run("a measured server", func(t *testing.T) {
		in, err := parseAdvise([]string{"--rate", "50k"})
		if err != nil {
			t.Fatal(err)
		}
		c := documentedCost()
		c.source, c.redisCPU, c.redlockCPU = "measured", 13, 13*docRedlockCPU/docRedisCPU
		k := advise(in, c).Capacity
		if k.Store != "redis" || k.Nodes != 1 || !near(k.PerGroupRate, headroom*1e6/13) {
			t.Errorf("capacity %+v; want one measured Redis carrying %.0f/s", k, headroom*1e6/13)
		}
	})
}
