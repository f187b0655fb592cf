package dashboard

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// session says who the caller is: the role decides which controls the
// page shows (the API decides what it allows).
func (p *Page) session(w http.ResponseWriter, r *http.Request) {
	role, err := p.o.Role(r.Header)
	if err != nil {
		// Not an error for the page, which then shows its login form.
		writeJSON(w, http.StatusOK, map[string]any{"authenticated": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"authenticated": true, "role": role, "charts": p.o.Gatherer != nil})
}

// lockRow is one held lock as the page shows it.
type lockRow struct {
	Key     string      `json:"key"`
	Kind    string      `json:"kind"`
	Held    bool        `json:"held"`
	Token   string      `json:"token"`
	Holders []holderRow `json:"holders"`
	// Waiters are the store's queue, or where the store keeps none
	// (-1), this instance's Watch streams of the key.
	Waiters int  `json:"waiters"`
	Queued  bool `json:"queued"` // Waiters are places in the store's queue
}

type holderRow struct {
	Owner    string `json:"owner"`
	Instance string `json:"instance"`
	Token    string `json:"token"`
	// TTLMillis is the time left unless renewed, when the answer was
	// made; -1 for a lease bounded by a session.
	TTLMillis int64 `json:"ttl_ms"`
}

// lockPage is a page of the lock list.
type lockPage struct {
	Locks []lockRow `json:"locks"`
	Page  int       `json:"page"`
	Pages int       `json:"pages"`
	// Listed is how many locks the store gave for the window; More: it
	// holds more than the window under the prefix (narrow the prefix).
	Listed int  `json:"listed"`
	More   bool `json:"more"`
	Window int  `json:"window"`
	// TookMillis is how long the store's listing took.
	TookMillis int64 `json:"took_ms"`
}

// locks serves a page of the locks held under a prefix: one List call of
// the window, sorted by key, cut into pages here, so that the browser
// gets a page whatever the store holds.
func (p *Page) locks(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	start := time.Now()
	resp, err := p.api.list(r.Context(), r, &v1.ListRequest{Prefix: q.Prefix, Limit: uint32(p.o.Window), Kind: q.Kind, Permits: q.Permits})
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p.pageOf(resp, q, time.Since(start)))
}

func (p *Page) pageOf(resp *v1.ListResponse, q listQuery, took time.Duration) lockPage {
	states := resp.Locks
	slices.SortFunc(states, func(a, b *v1.LockState) int { return strings.Compare(a.Key, b.Key) })
	out := lockPage{Page: q.Page, Listed: len(states), More: resp.More, Window: p.o.Window, TookMillis: took.Milliseconds(),
		Pages: max(1, (len(states)+q.Size-1)/q.Size), Locks: []lockRow{}}
	from := min(len(states), q.Page*q.Size)
	for _, st := range states[from:min(len(states), from+q.Size)] {
		out.Locks = append(out.Locks, p.rowOf(st, q.Kind))
	}
	return out
}

func (p *Page) rowOf(st *v1.LockState, k v1.Kind) lockRow {
	row := lockRow{Key: st.Key, Kind: kindName(k), Held: st.Held, Token: u64(st.Token), Waiters: int(st.Waiters), Queued: st.Waiters >= 0, Holders: []holderRow{}}
	if st.Waiters < 0 {
		row.Waiters = 0
		if p.o.Watchers != nil {
			row.Waiters = p.o.Watchers(st.Key)
		}
	}
	for _, h := range st.Holders {
		hr := holderRow{Owner: h.Owner, Instance: instanceOf(h.Owner), Token: u64(h.Token), TTLMillis: -1}
		if !h.Session && h.Ttl != nil {
			hr.TTLMillis = h.Ttl.AsDuration().Milliseconds()
		}
		row.Holders = append(row.Holders, hr)
	}
	return row
}

// instanceOf is the part of an owner id before its last '/': the
// instance (or the process, or an election's leader value) that made it.
func instanceOf(owner string) string {
	if i := strings.LastIndexByte(owner, '/'); i > 0 {
		return owner[:i]
	}
	return ""
}

// u64 is a token as the page gets it: a string, since JavaScript's
// numbers lose integers above 2^53.
func u64(n uint64) string {
	return strconv.FormatUint(n, 10)
}

// lock serves one key's state, by the API's Status.
func (p *Page) lock(w http.ResponseWriter, r *http.Request) {
	q, err := parseKeyQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	resp, err := p.api.status(r.Context(), r, &v1.StatusRequest{Key: q.Key, Kind: q.Kind, Permits: q.Permits})
	if err != nil {
		apiError(w, err)
		return
	}
	st := resp.GetState()
	if st == nil {
		st = &v1.LockState{Key: q.Key}
	}
	writeJSON(w, http.StatusOK, p.rowOf(st, q.Kind))
}
