package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/ha"
	"github.com/edgeset/edgeset/controller/leader"
	"github.com/edgeset/edgeset/schema"
)

func addHAFlags(f *pflag.FlagSet) {
	f.String("store", ha.StoreBolt, "where the controller keeps its state: bbolt (the data directory, one controller) or etcd (two or three HA controllers; needs --etcd-endpoints and --broker-url)")
	f.StringSlice("etcd-endpoints", nil, "etcd client URLs with --store etcd (http://etcd-1:2379,...)")
	f.String("etcd-prefix", ha.DefaultPrefix, "the fleet's key prefix in etcd (--store etcd)")
	f.String("etcd-cacert", "", "CA file verifying the etcd servers' certificates")
	f.String("etcd-cert", "", "client certificate file for etcd (with --etcd-key)")
	f.String("etcd-key", "", "key file of --etcd-cert")
	f.String("controller-id", "", "this controller's name among the fleet's HA controllers (default: the host name)")
	f.String("advertise-url", "", "URL the other controllers forward API requests to while this one leads (default: http(s):// and --api-addr, unless it listens on every address)")
	f.Duration("leader-lease-ttl", leader.DefaultTTL, "leader lease TTL: how long a dead leader keeps a standby from taking over (--store etcd)")
}

// checkBolt refuses HA keys that a bbolt controller would ignore.
func checkBolt(ctl controller.Config, h ha.Config) error {
	ctl.ApplyDefaults()
	h.ApplyDefaults(ctl)
	if err := h.Validate(ctl); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return nil
}

// runHA runs an HA controller: a supervisor leading through etcd or
// forwarding to the leader, until a signal.
func runHA(ctx context.Context, cfg controller.Config, h ha.Config, source string, stderr io.Writer) error {
	cfg.ApplyDefaults()
	h.ApplyDefaults(cfg)
	if err := errors.Join(cfg.Validate(), h.Validate(cfg)); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli, err := h.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	sup, err := ha.New(ha.Options{
		Controller: cfg, Client: cli, Prefix: h.EtcdPrefix,
		ID: h.ControllerID, AdvertiseURL: h.AdvertiseURL, LeaseTTL: h.LeaderLeaseTTL,
		Prepare: ha.Replicated(cli, h.EtcdPrefix, log), Log: log,
	})
	if err != nil {
		return err
	}
	log.Info("edgeset-controller starting (HA)", "version", schema.Version, "config", source,
		"id", h.ControllerID, "api", sup.Addr().String(), "advertise", h.AdvertiseURL,
		"etcd", h.EtcdEndpoints, "prefix", h.EtcdPrefix, "data", cfg.DataDir)
	start := time.Now()
	err = sup.Run(ctx)
	log.Info("edgeset-controller stopped", "uptime", time.Since(start).Round(time.Second))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
