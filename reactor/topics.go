package reactor

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Topic permissions (Options.Topics; docs/two-way.md, "Who may publish and
// subscribe"). handleFrame is where every Publish and Subscribe of a
// client enters, on the event loops and on the TLS transport alike; there
// a connection's TopicAccess, asked of the policy at its first Publish or
// Subscribe and kept, decides. A refused Subscribe is answered with an
// Unsubscribe, a refused Publish with an Error of call id 0
// (docs/protocol.md, "Publish and subscribe"); each is counted by kind and
// the policy's label, and logged, at most refusalLogBurst lines at once
// and one a second after.

// The kinds a refusal is counted under.
const (
	refusedPublish   = "publish"
	refusedSubscribe = "subscribe"
)

// refusalLogBurst and refusalLogEvery bound the log lines of refusals: a
// client that publishes where it may not, in a loop, does not flood the log.
const (
	refusalLogBurst = 5
	refusalLogEvery = time.Second
)

// TopicRefusal is what PubSubStats counts a refusal of Options.Topics
// under.
type TopicRefusal struct {
	Kind  string // "publish" or "subscribe"
	Label string // the policy's label for the topic or pattern (handler.TopicPolicy.Label)
}

// topicRefusals are the counters and the log limit of refusals.
type topicRefusals struct {
	mu         sync.Mutex
	counts     map[TopicRefusal]uint64
	log        *rate.Limiter
	suppressed atomic.Uint64 // lines not logged since the last one
}

func newTopicRefusals() topicRefusals {
	return topicRefusals{log: rate.NewLimiter(rate.Every(refusalLogEvery), refusalLogBurst)}
}

// snapshot returns a copy of the counts; nil if there are none.
func (r *topicRefusals) snapshot() map[TopicRefusal]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.counts) == 0 {
		return nil
	}
	out := make(map[TopicRefusal]uint64, len(r.counts))
	for k, n := range r.counts {
		out[k] = n
	}
	return out
}

// access returns the connection's topic permissions, asking Options.Topics
// the first time.
func (c *conn) access() handler.TopicAccess {
	if c.topics == nil {
		if c.topics = c.s.opts.Topics.Access(c.identity); c.topics == nil {
			c.topics = noTopics{}
		}
	}
	return c.topics
}

// noTopics stands for a policy's nil answer: nothing is allowed.
type noTopics struct{}

func (noTopics) MayPublish([]byte) bool   { return false }
func (noTopics) MaySubscribe([]byte) bool { return false }

// refusePublish answers a Publish the connection may not send: an Error of
// call id 0 naming the topic. Nothing is delivered.
func (c *conn) refusePublish(f *proto.Frame, out []byte) []byte {
	code, msg := c.refusal("publish to ", f.Route)
	c.refused(refusedPublish, f.Route)
	return proto.AppendError(out, 0, proto.FlagUnprocessed, code, msg)
}

// refuseSubscribe answers a Subscribe the connection may not make: an
// Unsubscribe for its id naming the pattern.
func (c *conn) refuseSubscribe(f *proto.Frame, out []byte) []byte {
	code, msg := c.refusal("subscribe to ", f.Route)
	c.refused(refusedSubscribe, f.Route)
	return proto.AppendUnsubscribe(out, f.ID, code, msg)
}

// refusal is the code and message a refusal to what (a Publish or a
// Subscribe) of topic carries.
func (c *conn) refusal(what string, topic []byte) (proto.Code, string) {
	if c.identity == nil {
		return proto.CodeUnauthenticated, "the connection has not authenticated: it may not " + what + string(topic)
	}
	return proto.CodePermissionDenied, c.identity.Subject + " may not " + what + string(topic)
}

// refused counts a refusal and logs it, if the log's rate allows.
func (c *conn) refused(kind string, topic []byte) {
	r := &c.s.refusals
	key := TopicRefusal{Kind: kind, Label: c.s.opts.Topics.Label(topic)}
	r.mu.Lock()
	if r.counts == nil {
		r.counts = make(map[TopicRefusal]uint64)
	}
	r.counts[key]++
	r.mu.Unlock()
	if !r.log.Allow() {
		r.suppressed.Add(1)
		return
	}
	subject := ""
	if c.identity != nil {
		subject = c.identity.Subject
	}
	c.s.log.Info("rpcd: topic permission refused", "kind", kind, "topic", string(topic), "subject", subject,
		"remote", c.remote, "suppressed", r.suppressed.Swap(0))
}
