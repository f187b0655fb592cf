package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/turnstilelock/turnstile/events"
)

// Events too large for the broker. A broker refuses a whole batch of
// records when one is larger than a record may be (events.ErrTooLarge),
// and sending that event again fails again: being the oldest unsent row,
// it would be claimed first and fail every batch, and no later event
// would ever be published. When a batch fails so, the relay sends its
// events again one at a time, in order, and moves each one refused on its
// own as too large — that one surely is — to the dead-letter table, as
// it does an undecodable row; the others are published and marked sent.

// tooLargeLog is the line logged for an event the broker refused as too
// large.
const tooLargeLog = "turnstile/outbox: event refused by the broker as too large, moved to turnstile_outbox_dead; later events of its key are published without it (raise the topic's max.message.bytes, then outbox.Requeue puts it back)"

// publishAlone publishes evs (of the rows ids) one at a time, in order,
// after the batch failed with failed; those that failed says the broker
// acknowledged (an *events.PublishError) are not sent again. It returns
// the rows and events published, and the rows of the events the broker
// refused on their own as too large. Any other failure ends it with the
// error: the claim is then given back whole, and events already
// published are sent again later.
func (r *Relay) publishAlone(ctx context.Context, ids []int64, evs []events.Event, failed error) (sentIDs []int64, sent []events.Event, dead []deadRow, err error) {
	var acked []bool
	if pe, ok := errors.AsType[*events.PublishError](failed); ok && len(pe.Acked) == len(evs) {
		acked = pe.Acked
	}
	for i, ev := range evs {
		var err error
		if acked == nil || !acked[i] {
			err = r.pub.Publish(ctx, ev)
		}
		switch {
		case errors.Is(err, events.ErrTooLarge):
			dead = append(dead, deadRow{id: ids[i], key: ev.Key, reason: fmt.Sprintf("too large for the broker: %v", err), log: tooLargeLog})
		case err != nil:
			return nil, nil, nil, err
		default:
			sentIDs, sent = append(sentIDs, ids[i]), append(sent, ev)
		}
	}
	return sentIDs, sent, dead, nil
}
