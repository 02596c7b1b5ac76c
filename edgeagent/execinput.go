package edgeagent

import (
	"errors"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// Why an interactive session's input ends it.
var (
	// errInputLost: a chunk never came while later ones filled the
	// window; going on would feed the command input with a hole in it.
	errInputLost = errors.New("exec input lost")
	// errInputOverflow: the command does not read its input as fast as
	// it comes, and the chunks held reached the bound.
	errInputOverflow = errors.New("exec input overflow")
)

// inputSequencer puts an interactive session's input chunks back in
// order (Seq from 0, no gaps): a chunk in order is handed out at once,
// with the held ones that follow it; one that comes early is held, up to
// max; a repeated one (Seq already handed out or held) is dropped. Not
// safe for concurrent use.
type inputSequencer struct {
	next int                      // the Seq handed out next
	held map[int]schema.ExecInput // arrived early, by Seq
	max  int                      // bound of held
}

func newInputSequencer(max int) *inputSequencer {
	return &inputSequencer{held: map[int]schema.ExecInput{}, max: max}
}

// accept takes in and returns the chunks now in order, oldest first. It
// fails with errInputLost when holding in would exceed max: the chunk
// at next is lost, or so late that waiting for it is not worth it.
func (q *inputSequencer) accept(in schema.ExecInput) ([]schema.ExecInput, error) {
	if in.Seq < q.next {
		return nil, nil // a repeat
	}
	if in.Seq > q.next {
		if _, ok := q.held[in.Seq]; ok {
			return nil, nil
		}
		if len(q.held) >= q.max {
			return nil, fmt.Errorf("%w: chunk %d did not come while %d later ones did", errInputLost, q.next, len(q.held))
		}
		q.held[in.Seq] = in
		return nil, nil
	}
	out := []schema.ExecInput{in}
	q.next++
	for {
		h, ok := q.held[q.next]
		if !ok {
			return out, nil
		}
		delete(q.held, q.next)
		out = append(out, h)
		q.next++
	}
}
