package placement

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/edgeset/edgeset/schema"
)

func TestExplain(t *testing.T) {
	ds := daemonSet(schema.PodSpec{
		NodeSelector: map[string]string{"site": "a"},
		Tolerations:  []schema.Toleration{tolFor("flaky", "Exists", "NoExecute", 60)},
	})
	nodes := []schema.Node{
		withTaints(node("gw-3", "site", "a"), taint("dedicated", "camera", schema.TaintNoSchedule)),
		node("gw-1", "site", "b"),
		withTaints(node("gw-2", "site", "a"), taint("flaky", "", schema.TaintNoExecute)),
		node("gw-0", "site", "a"),
	}
	results, err := Explain(ds, nodes, t0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	const want = `[
  {
    "node": "gw-0",
    "daemonset": "edge/agent",
    "run": true,
    "keepRunning": true,
    "reasons": []
  },
  {
    "node": "gw-1",
    "daemonset": "edge/agent",
    "run": false,
    "keepRunning": false,
    "reasons": [
      "node selector: label \"site\" is \"b\", want \"a\""
    ]
  },
  {
    "node": "gw-2",
    "daemonset": "edge/agent",
    "run": true,
    "keepRunning": true,
    "evictAt": "2025-06-01T12:01:00Z",
    "reasons": []
  },
  {
    "node": "gw-3",
    "daemonset": "edge/agent",
    "run": false,
    "keepRunning": true,
    "reasons": [
      "taint dedicated=camera:NoSchedule is not tolerated"
    ]
  }
]`
	if string(got) != want {
		t.Errorf("Explain as JSON:\n%s\nwant:\n%s", got, want)
	}
	if nodes[0].Name != "gw-3" {
		t.Errorf("Explain reordered its input: first node is %s", nodes[0].Name)
	}
}

func TestExplainKeepsOrderOfSameNames(t *testing.T) {
	nodes := []schema.Node{node("b"), node("a", "x", "1"), node("a", "x", "2")}
	p := mustCompile(t, affinityOnly(labelTerm(expr("x", "In", "2"))))
	got := p.Explain(nodes, t0)
	if len(got) != 3 || got[0].Node != "a" || got[0].Run || !got[1].Run || got[2].Node != "b" {
		t.Errorf("Explain = %+v, want a (no), a (yes), b", got)
	}
}

func TestExplainRejectsBadDaemonSet(t *testing.T) {
	if _, err := Explain(nil, nil, t0); !errors.Is(err, ErrNilDaemonSet) {
		t.Errorf("Explain(nil) error = %v, want ErrNilDaemonSet", err)
	}
	bad := daemonSet(affinityOnly(labelTerm(expr("ram", "Gt", "big"))))
	var fe *FieldError
	if _, err := Explain(bad, []schema.Node{node("n1")}, t0); !errors.As(err, &fe) {
		t.Errorf("Explain(bad) error = %v, want a *FieldError", err)
	}
}
