package service

import "sync"

// opPool runs the ops of batches on goroutines that live as long as the
// instance. A goroutine made per op starts with a small stack and grows
// it, by copying, to the depth of a store call — a quarter of an
// instance's CPU under load, before the pool; a pool's goroutines keep
// the stack they grew.
type opPool struct {
	tasks chan func()
	quit  chan struct{}
	wg    sync.WaitGroup
}

// poolSize is how many ops run on pooled goroutines at once; more run on
// goroutines of their own.
const poolSize = 256

func newOpPool() *opPool {
	p := &opPool{tasks: make(chan func()), quit: make(chan struct{})}
	for range poolSize {
		p.wg.Go(func() {
			for {
				select {
				case f := <-p.tasks:
					f()
				case <-p.quit:
					return
				}
			}
		})
	}
	return p
}

// run runs f on an idle pooled goroutine, or on a new one if none is
// idle.
func (p *opPool) run(f func()) {
	select {
	case p.tasks <- f:
	default:
		go f()
	}
}

func (p *opPool) close() {
	close(p.quit)
	p.wg.Wait()
}
