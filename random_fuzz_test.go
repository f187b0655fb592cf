package turnstile_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

// FuzzClient is the randomized checker (TestRandomized) driven by the
// fuzzer's input: the first byte picks the scenario, the rest make the
// workers' choices (locktest.FuzzRandom). Each input is one short run on
// the memory backend with token room, where the Client hands leases over
// without the store. scripts/fuzz.sh runs it with the other targets.
func FuzzClient(f *testing.F) {
	for i := range 9 {
		f.Add([]byte{byte(i), 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		locktest.FuzzRandom(t, locktest.RandomHarness{New: storePerTest(func() driver.Backend { return newRoomMemory() })}, data)
	})
}
