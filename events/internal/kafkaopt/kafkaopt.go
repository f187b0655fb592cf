// Package kafkaopt applies the options of the events publisher and of its
// consumer, and checks the ones they both take, with the same errors for
// both.
package kafkaopt

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
)

// SetTopic sets *dst to topic, which must not be empty.
func SetTopic(dst *string, topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", turnstile.ErrInvalidOption)
	}
	*dst = topic
	return nil
}

// AddClientOptions appends opts to *dst; none of them may be nil.
func AddClientOptions(dst *[]kgo.Opt, opts []kgo.Opt) error {
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil kafka client option %d", turnstile.ErrInvalidOption, i)
		}
	}
	*dst = append(*dst, opts...)
	return nil
}

// SetRegisterer sets *dst to reg, which must not be nil.
func SetRegisterer(dst *prometheus.Registerer, reg prometheus.Registerer) error {
	if reg == nil {
		return fmt.Errorf("%w: nil prometheus registerer", turnstile.ErrInvalidOption)
	}
	*dst = reg
	return nil
}

// Apply applies opts to cfg in order and returns the first error; a nil
// option is an error.
func Apply[C any, O ~func(*C) error](cfg *C, opts []O) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", turnstile.ErrInvalidOption)
		}
		if err := o(cfg); err != nil {
			return err
		}
	}
	return nil
}
