package monitor

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

var q = Queue{Target: "mailer", Command: "send", QueueARN: "arn:snavio:sqs:local:000000000000:mailer", ExpectedDrain: time.Minute}

func TestUnhealthyPastTwiceTheDrain(t *testing.T) {
	m := New(Config{})
	if st, ev := m.Observe(q, Sample{At: t0, Depth: 3, InFlight: 1, OldestAge: 2 * time.Minute}); st.Health != Healthy || ev != nil {
		t.Fatalf("at exactly 2x: %+v %v", st, ev)
	}
	st, ev := m.Observe(q, Sample{At: t0.Add(time.Second), Depth: 3, InFlight: 1, OldestAge: 2*time.Minute + time.Second})
	if st.Health != Unhealthy || ev == nil || !ev.Alert() || ev.Previous != Healthy || ev.Target != "mailer" {
		t.Fatalf("past 2x: %+v %+v", st, ev)
	}
	if _, ev := m.Observe(q, Sample{At: t0.Add(2 * time.Second), Depth: 3, InFlight: 1, OldestAge: 3 * time.Minute}); ev != nil {
		t.Fatal("an unchanged state emitted again")
	}
	st, ev = m.Observe(q, Sample{At: t0.Add(3 * time.Second), Depth: 0, OldestAge: 0})
	if st.Health != Healthy || ev == nil || ev.Alert() || ev.Previous != Unhealthy {
		t.Fatalf("recovery: %+v %+v", st, ev)
	}
}

func TestStalledWhenDepthKeepsGrowing(t *testing.T) {
	m := New(Config{StallSamples: 3})
	var last Status
	for i := int64(0); i < 4; i++ {
		last, _ = m.Observe(q, Sample{At: t0.Add(time.Duration(i) * 10 * time.Second), Depth: 10 + i, InFlight: 2, OldestAge: time.Second})
	}
	if last.Health != Stalled {
		t.Fatalf("4 growing samples with StallSamples 3: %+v", last)
	}
	if st, _ := m.Observe(q, Sample{At: t0.Add(time.Minute), Depth: 12, InFlight: 2, OldestAge: time.Second}); st.Health != Healthy {
		t.Fatalf("depth fell: %+v", st)
	}
}

func TestUnpolledWhenNothingIsEverInFlight(t *testing.T) {
	m := New(Config{})
	st, _ := m.Observe(q, Sample{At: t0, Depth: 1, OldestAge: time.Second})
	st, _ = m.Observe(q, Sample{At: t0.Add(59 * time.Second), Depth: 1, OldestAge: time.Minute})
	if st.Health != Healthy {
		t.Fatalf("inside one drain period: %+v", st)
	}
	st, ev := m.Observe(q, Sample{At: t0.Add(time.Minute), Depth: 1, OldestAge: 61 * time.Second})
	if st.Health != Unpolled || ev == nil || ev.Reason == "" {
		t.Fatalf("a drain period with nothing in flight: %+v %+v", st, ev)
	}
	// A receive (in flight) ends it.
	if st, _ := m.Observe(q, Sample{At: t0.Add(70 * time.Second), Depth: 1, InFlight: 1, OldestAge: 70 * time.Second}); st.Health != Healthy {
		t.Fatalf("after a receive: %+v", st)
	}
}

func TestDefaultDrainAndForget(t *testing.T) {
	m := New(Config{})
	noDrain := Queue{QueueARN: "x"}
	if st, _ := m.Observe(noDrain, Sample{At: t0, Depth: 1, InFlight: 1, OldestAge: 601 * time.Second}); st.Health != Unhealthy {
		t.Fatalf("default drain 300s: %+v", st)
	}
	m.Forget("x")
	if st, ev := m.Observe(noDrain, Sample{At: t0, Depth: 1, InFlight: 1, OldestAge: time.Second}); st.Health != Healthy || ev != nil {
		t.Fatalf("after Forget: %+v %v", st, ev)
	}
}

func TestLastIsTheLatestVerdict(t *testing.T) {
	m := New(Config{})
	if _, ok := m.Last(q.QueueARN); ok {
		t.Fatal("an unobserved queue has a verdict")
	}
	m.Observe(q, Sample{At: t0, Depth: 3, InFlight: 1, OldestAge: 3 * time.Minute})
	st, ok := m.Last(q.QueueARN)
	if !ok || st.Health != Unhealthy || st.Reason == "" || !st.Since.Equal(t0) {
		t.Fatalf("Last after an unhealthy sample = %+v, %v", st, ok)
	}
	m.Observe(q, Sample{At: t0.Add(time.Second), Depth: 0})
	if st, _ := m.Last(q.QueueARN); st.Health != Healthy || st.Reason != "" {
		t.Fatalf("Last after recovery = %+v", st)
	}
	m.Forget(q.QueueARN)
	if _, ok := m.Last(q.QueueARN); ok {
		t.Fatal("a forgotten queue has a verdict")
	}
}
