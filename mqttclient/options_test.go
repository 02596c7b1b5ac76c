package mqttclient

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
)

func TestNewValidation(t *testing.T) {
	handler := func(string, []byte) {}
	tests := []struct {
		name    string
		opts    Options
		wantErr string // substring; "" means success
		wantURL string // the brokers' URLs, comma-separated
	}{
		{name: "tcp default port", opts: Options{BrokerURL: "tcp://broker", ClientID: "n1"}, wantURL: "tcp://broker:1883"},
		{name: "mqtts default port", opts: Options{BrokerURL: "mqtts://broker", ClientID: "n1"}, wantURL: "mqtts://broker:8883"},
		{name: "explicit port kept", opts: Options{BrokerURL: "ssl://broker:9999", ClientID: "n1"}, wantURL: "ssl://broker:9999"},
		{name: "websocket", opts: Options{BrokerURL: "wss://broker/mqtt", ClientID: "n1"}, wantURL: "wss://broker/mqtt"},
		{name: "no url", opts: Options{ClientID: "n1"}, wantErr: "BrokerURL: required"},
		{name: "bad scheme", opts: Options{BrokerURL: "http://broker", ClientID: "n1"}, wantErr: `scheme "http"`},
		{name: "no host", opts: Options{BrokerURL: "tcp://:1883", ClientID: "n1"}, wantErr: "no host"},
		{name: "no client id", opts: Options{BrokerURL: "tcp://b"}, wantErr: "ClientID: required"},
		{name: "subscriptions without handler", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", Subscriptions: []Subscription{{Filter: "a/#", QoS: 1}}}, wantErr: "Handler: required"},
		{name: "bad filter", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", Handler: handler, Subscriptions: []Subscription{{Filter: "a/#/b", QoS: 1}}}, wantErr: "Subscriptions[0]"},
		{name: "partial wildcard", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", Handler: handler, Subscriptions: []Subscription{{Filter: "a/b+", QoS: 1}}}, wantErr: "whole level"},
		{name: "bad qos", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", Handler: handler, Subscriptions: []Subscription{{Filter: "a", QoS: 3}}}, wantErr: "QoS 3"},
		{name: "tls config on tcp", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", TLSConfig: &tls.Config{}}, wantErr: "not TLS"},
		{name: "cert without key", opts: Options{BrokerURL: "ssl://b", ClientID: "n1", CertFile: "c.pem"}, wantErr: "set both or neither"},
		{name: "missing CA file", opts: Options{BrokerURL: "ssl://b", ClientID: "n1", CAFile: "/nonexistent/ca.pem"}, wantErr: "CAFile"},
		{name: "dial with websocket", opts: Options{BrokerURL: "ws://b/mqtt", ClientID: "n1", Dial: (&net.Dialer{}).DialContext}, wantErr: "Dial: not supported"},
		{name: "dial with tcp", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", Dial: (&net.Dialer{}).DialContext}, wantURL: "tcp://b:1883"},
		{name: "list", opts: Options{BrokerURLs: []string{"tcp://a", "ssl://b:9999", "tcp://c:1884"}, ClientID: "n1"}, wantURL: "tcp://a:1883,ssl://b:9999,tcp://c:1884"},
		{name: "list of one", opts: Options{BrokerURLs: []string{"mqtt://a"}, ClientID: "n1"}, wantURL: "mqtt://a:1883"},
		{name: "url and list", opts: Options{BrokerURL: "tcp://a", BrokerURLs: []string{"tcp://b"}, ClientID: "n1"}, wantErr: "BrokerURL and BrokerURLs: set one, not both"},
		{name: "bad list entry named by index", opts: Options{BrokerURLs: []string{"tcp://a", "http://b"}, ClientID: "n1"}, wantErr: `BrokerURLs[1] "http://b": scheme "http"`},
		{name: "empty list entry", opts: Options{BrokerURLs: []string{"tcp://a", ""}, ClientID: "n1"}, wantErr: "BrokerURLs[1]: empty"},
		{name: "every bad entry", opts: Options{BrokerURLs: []string{"tcp://:1", "tcp://b", "udp://c"}, ClientID: "n1"}, wantErr: `BrokerURLs[0] "tcp://:1": no host` + "\n" + `BrokerURLs[2] "udp://c"`},
		{name: "too many", opts: Options{BrokerURLs: make([]string, MaxBrokerURLs+1), ClientID: "n1"}, wantErr: "at most 32"},
		{name: "tls options with a plain list entry", opts: Options{BrokerURLs: []string{"ssl://a", "tcp://b"}, ClientID: "n1", CAFile: "ca.pem"}, wantErr: "BrokerURLs[1] tcp://b:1883 is not TLS"},
		{name: "password masked", opts: Options{BrokerURLs: []string{"http://u:secret@b"}, ClientID: "n1"}, wantErr: `"http://u:xxxxx@b"`},
		{name: "dial with a websocket list entry", opts: Options{BrokerURLs: []string{"tcp://a", "ws://b/mqtt"}, ClientID: "n1", Dial: (&net.Dialer{}).DialContext}, wantErr: "Dial: not supported"},
		{name: "sub-second keepalive", opts: Options{BrokerURL: "tcp://b", ClientID: "n1", KeepAlive: 1}, wantErr: "KeepAlive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New() error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			var urls []string
			for _, b := range c.brokers {
				urls = append(urls, b.url)
			}
			if got := strings.Join(urls, ","); got != tc.wantURL {
				t.Errorf("broker URLs = %q, want %q", got, tc.wantURL)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	c := newClient(t, Options{BrokerURL: "tcp://b", ClientID: "n1"})
	o := c.opts
	if o.KeepAlive != DefaultKeepAlive || o.ConnectTimeout != DefaultConnectTimeout || o.WriteTimeout != DefaultWriteTimeout {
		t.Errorf("timeouts = %s/%s/%s, want defaults", o.KeepAlive, o.ConnectTimeout, o.WriteTimeout)
	}
	if o.FirstConnectJitter != DefaultBackoffInitial {
		t.Errorf("FirstConnectJitter = %s, want %s", o.FirstConnectJitter, DefaultBackoffInitial)
	}
	if o.PublishWindow != DefaultPublishWindow || o.EventBuffer != DefaultEventBuffer || o.MaxPendingTopics != DefaultMaxPendingTopics {
		t.Errorf("bounds = %d/%d/%d, want defaults", o.PublishWindow, o.EventBuffer, o.MaxPendingTopics)
	}
	if c.tls != nil {
		t.Errorf("tls config for tcp:// = %v, want nil", c.tls)
	}
	s := newClient(t, Options{BrokerURL: "tls://b", ClientID: "n1"})
	if s.tls == nil || s.tls.MinVersion != tls.VersionTLS12 {
		t.Errorf("tls config for tls:// = %+v, want TLS 1.2 minimum", s.tls)
	}
}
