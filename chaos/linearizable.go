package main

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// The fenced register as porcupine sees it: a counter and the guard's
// last token. A mark or a write is applied when its token is at least the
// guard's (the register allows one lease several writes); a read returns
// the counter.
type regState struct {
	val   int64
	guard uint64
}

type regInput struct {
	op  string // evMark, evRead, evWrite
	tok uint64
	val int64
}

type regOutput struct {
	res string // resOK, resStale, resUnknown (mark, write)
	val int64  // read
}

var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		fresh := in.tok >= s.guard
		applied := s
		applied.guard = in.tok
		if in.op == evWrite {
			applied.val = in.val
		}
		switch in.op {
		case evRead:
			if out.val == s.val {
				return []any{s}
			}
			return nil
		default:
			switch out.res {
			case resOK:
				if fresh {
					return []any{applied}
				}
			case resStale:
				if !fresh {
					return []any{s}
				}
			default: // unknown: applied or not
				if fresh {
					return []any{s, applied}
				}
				return []any{s}
			}
			return nil
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.op == evRead {
			return fmt.Sprintf("read() -> %d", out.val)
		}
		return fmt.Sprintf("%s(tok %d, %d) -> %s", in.op, in.tok, in.val, out.res)
	},
}

// linearizable checks the fenced register's history with porcupine. A
// write whose result never came back (its worker was killed) stays open
// until the end of the history.
func linearizable(events []event) string {
	type slot struct {
		w, cs int
		op    string
	}
	calls := map[slot]event{}
	var ops []porcupine.Operation
	for _, e := range events {
		switch e.Ev {
		case evCall:
			if e.Op == evMark || e.Op == evWrite {
				calls[slot{e.W, e.CS, e.Op}] = e
			}
		case evRead:
			ops = append(ops, porcupine.Operation{ClientId: e.W, Input: regInput{op: evRead},
				Call: e.Start, Output: regOutput{val: e.Val}, Return: e.End})
		case evMark, evWrite:
			s := slot{e.W, e.CS, e.Ev}
			c, ok := calls[s]
			if !ok {
				c = e
			}
			delete(calls, s)
			ops = append(ops, porcupine.Operation{ClientId: e.W, Input: regInput{op: e.Ev, tok: e.Tok, val: e.Val},
				Call: c.Start, Output: regOutput{res: e.Res}, Return: e.End})
		}
	}
	for _, c := range calls {
		ops = append(ops, porcupine.Operation{ClientId: c.W, Input: regInput{op: c.Op, tok: c.Tok, val: c.Val},
			Call: c.Start, Output: regOutput{res: resUnknown}, Return: math.MaxInt64})
	}
	if len(ops) == 0 {
		return "empty"
	}
	switch porcupine.CheckOperationsTimeout(registerModel.ToModel(), ops, time.Minute) {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "illegal"
	default:
		return "unknown"
	}
}
