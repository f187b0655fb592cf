package locktest

import (
	"sync"
	"testing"
)

// inTurn runs each worker in a goroutine of its own, rounds times in a
// row; a worker's error ends its goroutine, and once all have ended the
// case fails with the errors they ended on. The stress cases build their
// workers, one per simulated caller, and check what the rounds recorded
// after inTurn returns.
func inTurn(t *testing.T, rounds int, workers []func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(workers))
	for _, w := range workers {
		wg.Go(func() {
			for range rounds {
				if err := w(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
