package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
)

// advice is what "turnstile advise" prints; its JSON form is --json's
// output, whose field names are stable (docs/cli.md).
type advice struct {
	Input          adviseInput `json:"input"`
	Recommendation choice      `json:"recommendation"`
	RunnerUp       choice      `json:"runner_up"`
	Preset         preset      `json:"preset"`
	Capacity       capacity    `json:"capacity"`
	Alerts         []alert     `json:"alerts"`
	Notes          []string    `json:"notes"`
}

// choice is a row of the load table with the reasons for it (the
// recommendation) or against it (the runner-up).
type choice struct {
	Row       string   `json:"row"`
	Load      string   `json:"load"`
	Choice    string   `json:"choice"`
	Turnstile string   `json:"turnstile"`
	Reasons   []string `json:"reasons"`
}

// adviseCmd implements "turnstile advise".
func adviseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	in, err := parseAdvise(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, adviseUsage())
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "turnstile advise: %v\nRun \"turnstile advise -h\" for usage.\n", err)
		return exitUsage
	}
	c := documentedCost()
	if in.backend != "" {
		var code int
		if c, code = measureCost(ctx, in, stderr); code != exitOK {
			return code
		}
	}
	a := advise(in, c)
	if in.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(a); err != nil {
			fmt.Fprintf(stderr, "turnstile advise: %v\n", err)
			return 1
		}
		return exitOK
	}
	if err := a.writeTable(stdout); err != nil {
		fmt.Fprintf(stderr, "turnstile advise: %v\n", err)
		return 1
	}
	return exitOK
}

// advise works out the advice for in with the store costs c. Every
// figure it gives comes from the demand and c, worked out once.
func advise(in *adviseInput, c cost) advice {
	d := newDemand(in, c)
	row, reasons, because := pickRow(in, d, c)
	a := advice{Input: *in, Recommendation: rowChoice(row, reasons), RunnerUp: runnerUp(in, d, row, because, c)}
	a.Preset, a.Capacity = deploy(in, d, row, c)
	a.Alerts = pickAlerts(in, row, a.Preset)
	a.Notes = notes(in, row, a.Capacity, d, c)
	return a
}
