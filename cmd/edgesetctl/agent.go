package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// agentLabel selects the agent's daemonset's instances.
const agentLabel = "app.kubernetes.io/name"

func newAgentCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Upgrade the fleet's agents, rolled out like a daemonset",
		Long: `The agents upgrade themselves as the reserved daemonset ` + schema.AgentDaemonSet + `:
its revision names one agent binary per platform, and a node's agent, told
to run it, replaces its own binary, restarts, and returns to the previous
binary if the new one does not connect and receive its desired state within
the trial deadline. Budgets, canaries, per-site budgets, maintenance
windows, pause, undo and rollout status apply as to any daemonset
(docs/rollouts.md, "Upgrading the agent").`,
	}
	cmd.AddCommand(newAgentUpgradeCmd(s), newAgentStatusCmd(s))
	return cmd
}

// agentUpgradeOptions are agent upgrade's flags.
type agentUpgradeOptions struct {
	files, images     []string
	imagePath, docker string
	version           string
	maxUnavailable    string
	perTopology       string
	canary            string
	autoPromote       time.Duration
	failureThreshold  string
	autoRollback      bool
	progressDeadline  time.Duration
	trialDeadline     time.Duration
	trialAttempts     int
	nodeSelector      []string
	baselineTimeout   time.Duration
	wait              bool
	timeout, interval time.Duration
	changeCause       string
	flagsChanged      func(name string) bool
}

func newAgentUpgradeCmd(s *streams) *cobra.Command {
	var o agentUpgradeOptions
	cmd := &cobra.Command{
		Use:   "upgrade (--file [PLATFORM=]PATH | --image IMAGE)...",
		Short: "Roll a new agent binary out to the fleet",
		Long: `upgrade pushes one agent binary per platform to the controller's image store
and makes them the current revision of ` + schema.AgentDaemonSet + `, which
rolls out under its budget like any daemonset.

--file reads a binary (make cross builds bin/edgeset-agent-linux-amd64,
-arm64 and -armv7); its platform comes from its ELF header and Go build
information, or is given as linux-arm-v7=PATH. --image takes the binary from
an image of the local Docker engine, at --image-path (default
` + defaultImageBinaryPath + `). The version is asked of a binary this machine
runs (` + "`edgeset-agent version --json`" + `), or given with --version; every
node checks the binary it downloads reports it before anything is swapped.

The first upgrade creates the daemonset with a baseline revision, which
keeps whatever agent each node runs, and waits for it (--baseline-timeout),
so that the upgrade itself is a rolling update under the budget. The
strategy flags set the daemonset's; those not given keep what it has
(edgesetctl get ds edgeset-agent -n edgeset-system -o yaml, edited and
applied, changes anything else: windows, per-site budgets).`,
		Example: `  make cross
  edgesetctl agent upgrade --file bin/edgeset-agent-linux-amd64 --file bin/edgeset-agent-linux-arm64 \
      --file bin/edgeset-agent-linux-armv7 --max-unavailable 10% --canary 2 --wait
  edgesetctl agent upgrade --image registry.example/edgeset-agent:v1.4-arm64 --version v1.4
  edgesetctl agent status
  edgesetctl rollout status ds edgeset-agent -n edgeset-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.files) == 0 && len(o.images) == 0 {
				return usageError{errors.New("agent upgrade: give --file PATH or --image IMAGE (once per platform)")}
			}
			o.flagsChanged = func(name string) bool { return cmd.Flags().Changed(name) }
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			return cfg.explain(agentUpgrade(cmd.Context(), c, s, o))
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.files, "file", nil, "an agent binary, [PLATFORM=]PATH (repeat per platform)")
	f.StringArrayVar(&o.images, "image", nil, "an image of the local Docker engine holding an agent binary (repeat per platform)")
	f.StringVar(&o.imagePath, "image-path", defaultImageBinaryPath, "where the agent binary is in --image")
	f.StringVar(&o.docker, "docker-host", "", "Docker engine of --image (default: DOCKER_HOST or the local socket)")
	f.StringVar(&o.version, "version", "", "the binaries' version (default: asked of a binary this machine runs)")
	f.StringVar(&o.maxUnavailable, "max-unavailable", "1", "nodes upgraded at once: a count or a percentage")
	f.StringVar(&o.perTopology, "max-unavailable-per-topology", "", "per-site budget, KEY=COUNT or KEY=PERCENT% (site=1)")
	f.StringVar(&o.canary, "canary", "", "upgrade this many nodes (or percentage) first and wait for `rollout promote`")
	f.DurationVar(&o.autoPromote, "auto-promote", 0, "promote the canary after it has been available this long (0: wait for rollout promote)")
	f.StringVar(&o.failureThreshold, "failure-threshold", "1", "failed nodes (or percentage of those upgraded) that pause the rollout")
	f.BoolVar(&o.autoRollback, "auto-rollback", false, "on the failure threshold, roll the last complete revision out (the baseline: keep what runs)")
	f.DurationVar(&o.progressDeadline, "progress-deadline", 0, "a node not upgraded and available this long after it was told has failed (0: no deadline)")
	f.DurationVar(&o.trialDeadline, "trial-deadline", schema.DefaultAgentTrialDeadline, "a new binary must connect and receive its desired state this soon after it starts, or it rolls back")
	f.IntVar(&o.trialAttempts, "trial-attempts", schema.DefaultAgentTrialAttempts, "starts a new binary may make without confirming (a crash loop) before it rolls back")
	f.StringSliceVar(&o.nodeSelector, "node-selector", nil, "upgrade only the nodes with these labels, key=value,... (a new daemonset only; default: every node)")
	f.DurationVar(&o.baselineTimeout, "baseline-timeout", 5*time.Minute, "on the first upgrade, how long to wait for every online node to take the baseline revision")
	f.BoolVar(&o.wait, "wait", false, "follow the rollout until it completes (exit 0) or fails (exit 1), as rollout status does")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "with --wait: give up after this long")
	f.DurationVar(&o.interval, "interval", time.Second, "with --wait: how often to poll the controller")
	f.StringVar(&o.changeCause, "change-cause", "", "recorded as kubernetes.io/change-cause (default: agent VERSION)")
	return cmd
}

// agentUpgrade does agent upgrade: binaries, version, push, baseline,
// apply, and with --wait the rollout.
func agentUpgrade(ctx context.Context, c *api.Client, s *streams, o agentUpgradeOptions) error {
	bins, cleanup, err := collectAgentBinaries(ctx, o)
	defer cleanup()
	if err != nil {
		return err
	}
	version, err := agentVersion(ctx, bins, o.version)
	if err != nil {
		return err
	}
	current, err := c.GetDaemonSet(ctx, schema.AgentDaemonSet)
	exists := err == nil
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return err
	}
	base := schema.DaemonSet{}
	if exists {
		base = current.Manifest
	}
	target, err := agentDaemonSet(base, exists, o, version, bins)
	if err != nil {
		return err
	}
	if err := pushAgentBinaries(ctx, c, s.out, bins, version); err != nil {
		return err
	}
	if !exists {
		if err := applyAgentBaseline(ctx, c, s.out, target, o); err != nil {
			return err
		}
	}
	res, err := applyAgent(ctx, c, target)
	if err != nil {
		return err
	}
	platforms := make([]string, len(bins))
	for i, b := range bins {
		platforms[i] = schema.DisplayAgentPlatform(b.platform)
	}
	fmt.Fprintf(s.out, "daemonset/%s %s: agent %s for %s (revision %d)\n", schema.AgentDaemonSet, res.Action, version, strings.Join(platforms, ", "), res.Revision)
	if !o.wait {
		fmt.Fprintf(s.out, "follow it: edgesetctl agent status, or edgesetctl rollout status ds %s -n %s\n", schema.AgentName, schema.AgentNamespace)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return followRollout(wctx, c, s, schema.AgentDaemonSet, o.interval)
}

// collectAgentBinaries inspects --file and --image binaries; one per
// platform. cleanup removes what --image extracted.
func collectAgentBinaries(ctx context.Context, o agentUpgradeOptions) ([]agentBinary, func(), error) {
	var tmp string
	cleanup := func() {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
	}
	var bins []agentBinary
	for _, spec := range o.files {
		platform, file := "", spec
		if p, rest, ok := strings.Cut(spec, "="); ok {
			if _, _, _, valid := schema.SplitAgentPlatform(p); valid {
				platform, file = p, rest
			}
		}
		b, err := inspectAgentBinary(file, file, platform)
		if err != nil {
			return nil, cleanup, fmt.Errorf("--file %w", err)
		}
		bins = append(bins, b)
	}
	for _, image := range o.images {
		if tmp == "" {
			var err error
			if tmp, err = os.MkdirTemp("", "edgeset-agent-images-"); err != nil {
				return nil, cleanup, err
			}
		}
		path, err := binaryFromImage(ctx, o.docker, image, o.imagePath, tmp)
		if err != nil {
			return nil, cleanup, err
		}
		b, err := inspectAgentBinary(image+":"+o.imagePath, path, "")
		if err != nil {
			return nil, cleanup, fmt.Errorf("--image %w", err)
		}
		bins = append(bins, b)
	}
	seen := map[string]string{}
	for _, b := range bins {
		if prev, dup := seen[b.platform]; dup {
			return nil, cleanup, usageError{fmt.Errorf("%s and %s are both for %s: give one binary per platform", prev, b.source, schema.DisplayAgentPlatform(b.platform))}
		}
		seen[b.platform] = b.source
	}
	slices.SortFunc(bins, func(a, b agentBinary) int { return strings.Compare(a.platform, b.platform) })
	return bins, cleanup, nil
}

// pushAgentBinaries pushes each binary as a one-layer image, unless the
// store holds its image already (a retry of an upgrade over a bad link).
func pushAgentBinaries(ctx context.Context, c *api.Client, out io.Writer, bins []agentBinary, version string) error {
	list, err := c.ListImages(ctx)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, im := range list.Images {
		have[im.Name] = true
	}
	for _, b := range bins {
		name := schema.AgentBinaryImage(version, b.platform, b.digest)
		if have["docker.io/"+name] || have[name] {
			fmt.Fprintf(out, "image %s already in the controller's store\n", name)
			continue
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeAgentImage(pw, b, version)) }()
		_, err := c.PushImage(ctx, pr, name)
		_ = pr.Close()
		if err != nil {
			return fmt.Errorf("push %s (%s): %w", b.source, name, err)
		}
		fmt.Fprintf(out, "pushed %s (%s, %s)\n", name, b.digest, mebibytes(b.size))
	}
	return nil
}

func mebibytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// agentDaemonSet builds the reserved daemonset naming bins: base (the
// live one, when exists) with the strategy flags given applied, or a new
// one from the flags.
func agentDaemonSet(base schema.DaemonSet, exists bool, o agentUpgradeOptions, version string, bins []agentBinary) (schema.DaemonSet, error) {
	ds := base
	ds.TypeMeta = schema.TypeMeta{APIVersion: schema.APIVersionEdgeset, Kind: schema.KindDaemonSet}
	ds.Metadata.Name, ds.Metadata.Namespace = schema.AgentName, schema.AgentNamespace
	ds.Metadata.Annotations = maps.Clone(ds.Metadata.Annotations)
	if ds.Metadata.Annotations == nil {
		ds.Metadata.Annotations = map[string]string{}
	}
	ds.Metadata.Annotations["kubernetes.io/change-cause"] = cmp.Or(o.changeCause, "agent "+version)
	labels := map[string]string{agentLabel: schema.AgentName}
	if !exists {
		ds.Spec.Selector = &schema.LabelSelector{MatchLabels: labels}
	}
	if err := applyAgentStrategy(&ds, exists, o); err != nil {
		return ds, err
	}
	sel, err := agentNodeSelector(base, exists, o)
	if err != nil {
		return ds, err
	}
	ds.Spec.Template = agentTemplate(labels, sel, version, bins, o)
	if err := schema.ValidateDaemonSet(&ds); err != nil {
		return ds, fmt.Errorf("agent upgrade: %w", err)
	}
	return ds, nil
}

// agentTemplate is the template naming bins: one container per platform,
// the digests and trial in annotations, on the nodes of their
// architectures, every taint tolerated (the agent runs on every node).
func agentTemplate(labels, nodeSelector map[string]string, version string, bins []agentBinary, o agentUpgradeOptions) schema.PodTemplateSpec {
	ann := map[string]string{
		schema.AnnotationAgentVersion:       version,
		schema.AnnotationAgentTrialDeadline: o.trialDeadline.String(),
		schema.AnnotationAgentTrialAttempts: fmt.Sprint(o.trialAttempts),
	}
	var archs []string
	var containers []schema.Container
	for _, b := range bins {
		ann[schema.AnnotationAgentDigestPrefix+b.platform] = b.digest
		containers = append(containers, schema.Container{Name: b.platform, Image: schema.AgentBinaryImage(version, b.platform, b.digest)})
		if _, arch, _, _ := schema.SplitAgentPlatform(b.platform); !slices.Contains(archs, arch) {
			archs = append(archs, arch)
		}
	}
	return schema.PodTemplateSpec{
		Metadata: schema.ObjectMeta{Labels: labels, Annotations: ann},
		Spec: schema.PodSpec{
			NodeSelector: nodeSelector,
			Affinity: &schema.Affinity{NodeAffinity: &schema.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &schema.NodeSelector{
				NodeSelectorTerms: []schema.NodeSelectorTerm{{MatchExpressions: []schema.NodeSelectorRequirement{
					{Key: schema.LabelArch, Operator: schema.NodeOpIn, Values: archs}}}}}}},
			Tolerations: []schema.Toleration{{Operator: "Exists"}},
			ImageSource: schema.ImageSourceController,
			Containers:  containers,
		},
	}
}

// agentNodeSelector is the template's node selector: kubernetes.io/os
// linux plus --node-selector on a new daemonset, what the live one has
// otherwise.
func agentNodeSelector(base schema.DaemonSet, exists bool, o agentUpgradeOptions) (map[string]string, error) {
	if exists {
		if o.flagsChanged("node-selector") {
			return nil, usageError{errors.New("--node-selector: the daemonset exists; change its node selector by applying it (edgesetctl get ds edgeset-agent -n edgeset-system -o yaml)")}
		}
		return base.Spec.Template.Spec.NodeSelector, nil
	}
	sel := map[string]string{schema.LabelOS: "linux"}
	for _, kv := range o.nodeSelector {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--node-selector %q: want key=value", kv)}
		}
		sel[k] = v
	}
	return sel, nil
}

// applyAgentStrategy sets the strategy flags given (all of them, with
// their defaults, on a new daemonset).
func applyAgentStrategy(ds *schema.DaemonSet, exists bool, o agentUpgradeOptions) error {
	set := func(name string) bool { return !exists || o.flagsChanged(name) }
	if set("max-unavailable") {
		v := intOrPercent(o.maxUnavailable)
		ds.Spec.UpdateStrategy = schema.DaemonSetUpdateStrategy{Type: schema.RollingUpdateStrategy,
			RollingUpdate: &schema.RollingUpdateDaemonSet{MaxUnavailable: &v, MaxSurge: ptrTo(schema.FromInt(0))}}
	}
	if ds.Spec.Rollout == nil {
		ds.Spec.Rollout = &schema.RolloutPolicy{}
	} else {
		r := *ds.Spec.Rollout
		ds.Spec.Rollout = &r
	}
	r := ds.Spec.Rollout
	if set("failure-threshold") {
		v := intOrPercent(o.failureThreshold)
		r.FailureThreshold = &v
	}
	if set("auto-rollback") {
		r.AutoRollback = o.autoRollback
	}
	if o.flagsChanged("progress-deadline") {
		r.ProgressDeadlineSeconds = ptrTo(int32(o.progressDeadline / time.Second))
	}
	if o.flagsChanged("canary") || o.flagsChanged("auto-promote") {
		if o.canary == "" {
			return usageError{errors.New("--auto-promote: needs --canary")}
		}
		v := intOrPercent(o.canary)
		r.Canary = &schema.CanaryPolicy{Nodes: &v, AutoPromoteSeconds: int32(o.autoPromote / time.Second)}
	}
	if o.flagsChanged("max-unavailable-per-topology") {
		key, val, ok := strings.Cut(o.perTopology, "=")
		if !ok || key == "" {
			return usageError{fmt.Errorf("--max-unavailable-per-topology %q: want KEY=COUNT or KEY=PERCENT%%", o.perTopology)}
		}
		v := intOrPercent(val)
		r.MaxUnavailablePerTopology = &schema.TopologyBudget{TopologyKey: key, MaxUnavailable: &v}
	}
	return nil
}

// intOrPercent reads a count or a percentage; validation reports a bad
// one with its field.
func intOrPercent(s string) schema.IntOrString {
	var n int32
	if _, err := fmt.Sscan(s, &n); err == nil && fmt.Sprint(n) == s {
		return schema.FromInt(n)
	}
	return schema.FromString(s)
}

func ptrTo[T any](v T) *T { return &v }

// applyAgentBaseline applies the baseline revision of ds (one that keeps
// the agent each node runs) and waits until it is complete: the upgrade
// that follows is then a rolling update of nodes that run the baseline.
func applyAgentBaseline(ctx context.Context, c *api.Client, out io.Writer, ds schema.DaemonSet, o agentUpgradeOptions) error {
	baseline := ds
	baseline.Metadata.Annotations = map[string]string{"kubernetes.io/change-cause": "baseline: the agents the nodes run"}
	baseline.Spec.Template.Metadata.Annotations = nil
	baseline.Spec.Template.Spec.Affinity = nil
	baseline.Spec.Template.Spec.Containers = []schema.Container{{Name: schema.AgentBaselineContainer, Image: schema.AgentBaselineImage}}
	if _, err := applyAgent(ctx, c, baseline); err != nil {
		return fmt.Errorf("baseline revision: %w", err)
	}
	fmt.Fprintf(out, "daemonset/%s created with the baseline revision (each node keeps the agent it runs); waiting for the nodes to take it\n", schema.AgentDaemonSet)
	wctx, cancel := context.WithTimeout(ctx, o.baselineTimeout)
	defer cancel()
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		cur, err := c.GetDaemonSet(wctx, schema.AgentDaemonSet)
		if err == nil {
			if done, ferr := rolloutOutcome(cur); done {
				return ferr
			}
		} else if wctx.Err() == nil {
			return err
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("the baseline revision was not taken by every online node within %s (--baseline-timeout); nothing was upgraded: edgesetctl agent status shows the nodes, run the upgrade again once they report", o.baselineTimeout)
		case <-tick.C:
		}
	}
}

// applyAgent applies ds and returns the result for the daemonset.
func applyAgent(ctx context.Context, c *api.Client, ds schema.DaemonSet) (api.ApplyResult, error) {
	body, err := json.Marshal(ds)
	if err != nil {
		return api.ApplyResult{}, err
	}
	results, err := c.Apply(ctx, "agent upgrade", body, false)
	if err != nil {
		return api.ApplyResult{}, err
	}
	for _, r := range results {
		if r.Key == schema.AgentDaemonSet {
			if r.Message != "" {
				return r, fmt.Errorf("%s: %s", r.Action, r.Message)
			}
			return r, nil
		}
	}
	return api.ApplyResult{}, fmt.Errorf("the controller applied no daemonset %s", schema.AgentDaemonSet)
}

func newAgentStatusCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each node's agent version and its upgrade",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			return cfg.explain(agentStatus(cmd.Context(), c, s.out))
		},
	}
}

// agentStatus prints the target and a row per node: its platform, the
// agent version it announces, and its instance of the agent's daemonset.
func agentStatus(ctx context.Context, c *api.Client, out io.Writer) error {
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		return err
	}
	ds, err := c.GetDaemonSet(ctx, schema.AgentDaemonSet)
	switch {
	case errors.Is(err, api.ErrNotFound):
		fmt.Fprintf(out, "no agent upgrade yet (edgesetctl agent upgrade creates %s)\n", schema.AgentDaemonSet)
	case err != nil:
		return err
	default:
		fmt.Fprintln(out, agentTargetLine(ds))
		fmt.Fprintln(out, progressLine(schema.AgentDaemonSet, ds))
	}
	instances := map[string]api.Instance{}
	for _, in := range ds.Instances {
		instances[in.Node] = in
	}
	t := newTable(out, "NODE", "ONLINE", "PLATFORM", "AGENT", "REVISION", "PHASE", "MESSAGE")
	for _, n := range nodes {
		in, ok := instances[n.Name]
		rev, phase := "<none>", "<none>"
		if ok {
			rev, phase = shortHash(in.Revision), cmp.Or(in.Phase, "<none>")
		}
		t.row(n.Name, yesNo(n.Online), n.Info.OS+"/"+n.Info.Arch, orNone(n.Info.AgentVersion), rev, phase, in.Message)
	}
	return t.flush()
}

// agentTargetLine says which agent the current revision asks for.
func agentTargetLine(ds api.DaemonSet) string {
	up, err := schema.ParseAgentUpgrade(ds.Manifest.Spec.Template)
	switch {
	case err != nil:
		return fmt.Sprintf("target: revision %d (%s): %v", ds.CurrentRevision, shortHash(ds.CurrentHash), err)
	case up.Baseline():
		return fmt.Sprintf("target: revision %d (%s), the baseline: each node keeps the agent it runs", ds.CurrentRevision, shortHash(ds.CurrentHash))
	}
	platforms := make([]string, 0, len(up.Binaries))
	for _, p := range up.Platforms() {
		platforms = append(platforms, schema.DisplayAgentPlatform(p))
	}
	return fmt.Sprintf("target: agent %s for %s, revision %d (%s); trial %s, %d starts",
		up.Version, strings.Join(platforms, ", "), ds.CurrentRevision, shortHash(ds.CurrentHash), up.TrialDeadline, up.TrialAttempts)
}
