package reactor

import (
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestPublishPathAllocs: a wake-up of publishes allocates nothing on the
// server, without topic permissions (where they cost a nil check) and
// with them (the connection's permissions, decided at its first Publish,
// are matched in place).
func TestPublishPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	topics, err := auth.Topics(map[string]auth.TopicRules{
		auth.EveryRole: {Publish: auth.TopicList{Allow: []string{"chat.*", "ticks.>"}, Deny: []string{"ticks.secret.>"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		topics handler.TopicPolicy
	}{{"without permissions", nil}, {"with permissions", topics}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := handler.NewRegistry()
			builtin.Register(reg)
			s := New(reg, Options{Topics: tc.topics})
			fc := &fakeConn{}
			if _, action := s.ev.OnOpen(fc); action != 0 {
				t.Fatal("OnOpen refused the connection")
			}
			var batch []byte
			for range 16 {
				batch = proto.AppendPublish(batch, "ticks.eu.btc", proto.CodecRaw, make([]byte, 16))
			}
			w := &countingConn{fakeConn: fc}
			allocs := testing.AllocsPerRun(500, func() {
				fc.in = batch
				s.ev.OnTraffic(w)
			})
			if allocs != 0 {
				t.Fatalf("%.2f allocations per wake-up of 16 publishes, want 0", allocs)
			}
			if st := s.PubSubStats(); st.Published == 0 || st.Refused != nil {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
