package fake

import (
	"context"
	"sync"
	"time"
)

// A pull of an image of ImageSize bytes over a link of LinkBytesPerSecond
// takes size/speed: the engine transfers one image at a time (a second
// pull waits for the link), and keeps what an interrupted pull
// transferred, as an engine keeps the layers it completed, so the next
// pull resumes there. Pulling an image that is present transfers
// nothing. Without both knobs a pull is instant.

// transferTick is how often a transfer advances and reports progress.
const transferTick = 50 * time.Millisecond

// pulls is the engine's transfers: the link, what each image has
// transferred so far, and when each pull finished.
type pulls struct {
	link sync.Mutex // held by the transfer under way

	mu       sync.Mutex // guards partial and finished
	partial  map[string]int64
	finished map[string]time.Time
}

func newPulls() pulls {
	return pulls{partial: map[string]int64{}, finished: map[string]time.Time{}}
}

// done records that image's pull finished at t.
func (p *pulls) done(image string, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.partial, image)
	p.finished[image] = t
}

// PulledAt returns when the last pull of image finished (by the engine's
// clock); false if it never was pulled (an image added with AddImage).
func (r *Runtime) PulledAt(image string) (time.Time, bool) {
	r.pulls.mu.Lock()
	defer r.pulls.mu.Unlock()
	t, ok := r.pulls.finished[image]
	return t, ok
}

// transfer moves image's bytes over the link, from where an earlier pull
// stopped, reporting progress; it returns ctx's error when cancelled.
func (r *Runtime) transfer(ctx context.Context, image string, progress func(done, total int64)) error {
	speed := r.LinkBytesPerSecond
	if r.ImageSize == nil || speed <= 0 {
		return nil
	}
	size := r.ImageSize(image)
	if size <= 0 {
		return nil
	}
	p := &r.pulls
	p.link.Lock()
	defer p.link.Unlock()
	r.mu.Lock()
	present := r.images[image]
	r.mu.Unlock()
	if present {
		return nil // pulled while this pull waited for the link, or pulled again: its layers are there
	}
	p.mu.Lock()
	done := p.partial[image]
	p.mu.Unlock()
	report := func() {
		if progress != nil {
			progress(done, size)
		}
	}
	report()
	last := time.Now()
	for done < size {
		err := sleepCtx(ctx, min(transferTick, time.Duration(float64(size-done)/float64(speed)*float64(time.Second))+time.Millisecond))
		now := time.Now()
		done = min(size, done+int64(now.Sub(last).Seconds()*float64(speed)))
		last = now
		p.mu.Lock()
		p.partial[image] = done
		p.mu.Unlock()
		report()
		if err != nil {
			return err
		}
	}
	return nil
}
