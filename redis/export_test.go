package redis

import "time"

// ParseParsedURL exposes the URL parser of a parsed URL to the external tests.
var ParseParsedURL = parseURL

// SetClockReading makes b read its server's clock as us (µs since the
// epoch) now, as if it had just sampled it: its next grants' tokens start
// there until the reading is clockResync old.
func (b *Backend) SetClockReading(us int64) {
	now := time.Now()
	b.clock.sample.Store(&clockSample{server: us, local: now, wall: now.Round(0)})
}

// FreshMargin is how far above the greater of the reading and the
// server's TIME the token of a key whose fence key is gone starts.
var FreshMargin = clockMaxError + 5*time.Millisecond
