// Command app is the process inside edgeset's test image: a static binary
// with one behaviour per subcommand, so container tests can ask for exactly
// the lifecycle they exercise. Scratch images have no shell, so everything a
// test needs to run inside the container (exec probes included) lives here.
//
//	app sleep                 print a line, run until SIGTERM, exit 0
//	app exit N [DELAY]        print a line, wait DELAY (Go duration), exit N
//	app serve PORT            HTTP: /ready 200 when /tmp/ready exists or READY=1,
//	                          /healthz 200 unless /tmp/unhealthy exists
//	app write PATH            write PATH; exit 0 on success, 1 on failure
//	app ignore-term           ignore SIGTERM, run until killed
//	app check FILE            exit 0 if FILE exists, 1 otherwise
//	app touch FILE            create FILE; exit 0 on success
//	app hold FILE             create FILE exclusively (a lock file), then run
//	                          until SIGTERM; exit 1 if FILE exists
//	app rm FILE               remove FILE; exit 0 on success
//	app show [ARG...]         print what the process sees: its arguments, its
//	                          environment, uid, gid, effective capabilities,
//	                          and the content of each file listed in SHOW_FILES
//	                          (colon-separated); then print a file again
//	                          whenever its content changes, until SIGTERM
//	app cat FILE              print FILE (e.g. /proc/self/status), then run until SIGTERM
//	app pwd                   print the working directory; exit 0, or 1 if it cannot
//	app oom                   allocate memory until the kernel kills the process
//	app spin MIB              hold MIB mebibytes and keep one CPU busy (five minutes at most)
//	app stdin                 copy stdin to stdout; at its end say so on stderr, exit 0
//	app repl                  a shell-like loop on stdin: prompt "app> ", then per line:
//	                          "size" prints the terminal's size ("size COLSxROWS"),
//	                          "err TEXT" prints TEXT on stderr, "exit N" exits N,
//	                          anything else prints "echo: LINE"; the end of stdin exits 0
//
// Every mode but ignore-term exits 0 promptly on SIGTERM: as PID 1 the
// process would otherwise never see the signal.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

// Files that steer the serve mode's endpoints.
const (
	readyFile     = "/tmp/ready"
	unhealthyFile = "/tmp/unhealthy"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"sleep"}
	}
	if args[0] != "ignore-term" {
		exitOnTerm()
	}
	os.Exit(run(args[0], args[1:]))
}

// exitOnTerm makes SIGTERM and SIGINT end the process with status 0.
func exitOnTerm() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		fmt.Printf("app: %s, exiting\n", s)
		os.Exit(0)
	}()
}

// run executes one subcommand and returns the process exit status.
func run(mode string, args []string) int {
	switch mode {
	case "sleep":
		fmt.Println("app: sleeping")
		block()
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("app: ignoring SIGTERM")
		block()
	case "exit":
		return exit(args)
	case "serve":
		return serve(args)
	case "write":
		return fileOp(args, func(p string) error { return os.WriteFile(p, []byte("edgeset\n"), 0o644) })
	case "touch":
		return fileOp(args, func(p string) error { return os.WriteFile(p, nil, 0o644) })
	case "check":
		return fileOp(args, func(p string) error { _, err := os.Stat(p); return err })
	case "hold":
		if code := fileOp(args, createExclusive); code != 0 {
			return code
		}
		block()
	case "rm":
		return fileOp(args, os.Remove)
	case "show":
		show(args)
	case "cat":
		return cat(args)
	case "pwd":
		return pwd()
	case "oom":
		oom()
	case "spin":
		return spin(args)
	case "stdin":
		return echoStdin()
	case "repl":
		return repl()
	}
	fmt.Fprintf(os.Stderr, "app: unknown mode %q\n", mode)
	return 2
}

// block never returns. It sleeps rather than selecting on nothing, which
// the runtime would report as a deadlock when no signal goroutine runs.
func block() {
	for {
		time.Sleep(time.Hour)
	}
}

// exit handles "exit N [DELAY]".
func exit(args []string) int {
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: app exit N [DELAY]")
		return 2
	}
	code, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "app: exit code %q: %v\n", args[0], err)
		return 2
	}
	if len(args) == 2 {
		delay, err := time.ParseDuration(args[1])
		if err != nil {
			fmt.Fprintf(os.Stderr, "app: delay %q: %v\n", args[1], err)
			return 2
		}
		time.Sleep(delay)
	}
	fmt.Printf("app: exiting with %d\n", code)
	fmt.Fprintf(os.Stderr, "app: stderr exiting with %d\n", code)
	return code
}

// serve handles "serve PORT"; it returns only if the listener fails.
func serve(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: app serve PORT")
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if os.Getenv("READY") == "1" || exists(readyFile) {
			fmt.Fprintln(w, "ready")
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if exists(unhealthyFile) {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	fmt.Printf("app: serving on :%s\n", args[0])
	err := http.ListenAndServe(":"+args[0], mux)
	fmt.Fprintf(os.Stderr, "app: serve: %v\n", err)
	return 1
}

// fileOp runs op on the single path argument and reports the outcome.
func fileOp(args []string, op func(path string) error) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: app write|touch|check PATH")
		return 2
	}
	if err := op(args[0]); err != nil {
		fmt.Printf("app: %s: %v\n", args[0], err)
		return 1
	}
	fmt.Printf("app: %s: ok\n", args[0])
	return 0
}

// createExclusive creates path, failing if it exists: how a daemon takes a
// lock file (the shell's set -C; : > FILE).
func createExclusive(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// cat handles "cat FILE": it prints the file and keeps running, so a test
// reads what a running process sees.
func cat(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: app cat FILE")
		return 2
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Printf("app: %v\n", err)
		return 1
	}
	fmt.Printf("%s", b)
	fmt.Println("app: cat done")
	block()
	return 0
}

// echoStdin copies standard input to standard output, "app: stdin done"
// to standard error, and exits 0.
func echoStdin() int {
	if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "app: %v\n", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "app: stdin done")
	return 0
}

// repl answers stdin line by line, as a shell would (see the package doc).
func repl() int {
	in := bufio.NewScanner(os.Stdin)
	for {
		fmt.Print("app> ")
		if !in.Scan() {
			fmt.Println()
			return 0
		}
		line := strings.TrimSpace(in.Text())
		switch {
		case line == "size":
			w, h, err := term.GetSize(int(os.Stdin.Fd()))
			if err != nil {
				fmt.Printf("size: %v\n", err)
				continue
			}
			fmt.Printf("size %dx%d\n", w, h)
		case strings.HasPrefix(line, "err "):
			fmt.Fprintln(os.Stderr, strings.TrimPrefix(line, "err "))
		case strings.HasPrefix(line, "exit "):
			code, err := strconv.Atoi(strings.TrimPrefix(line, "exit "))
			if err != nil {
				fmt.Printf("exit: %v\n", err)
				continue
			}
			return code
		default:
			fmt.Printf("echo: %s\n", line)
		}
	}
}

// pwd prints the working directory.
func pwd() int {
	dir, err := os.Getwd()
	if err != nil {
		fmt.Printf("app: %v\n", err)
		return 1
	}
	fmt.Printf("app: pwd %s\n", dir)
	return 0
}

// oom touches ever more memory, so a memory limit ends it by the OOM
// killer; without one it stops at 4 GiB.
// spin handles "spin MIB": it holds MIB mebibytes, touched, and keeps
// one CPU busy for at most five minutes (telemetry tests measure both),
// then sleeps.
func spin(args []string) int {
	mib := 0
	if len(args) > 0 {
		if _, err := fmt.Sscan(args[0], &mib); err != nil || mib < 0 {
			fmt.Fprintf(os.Stderr, "app: spin %q: want a number of MiB\n", args[0])
			return 2
		}
	}
	held := make([]byte, max(mib<<20, 1))
	for i := range held {
		held[i] = 1
	}
	fmt.Printf("app: spinning with %d MiB\n", mib)
	deadline := time.Now().Add(5 * time.Minute)
	for n := 0; time.Now().Before(deadline); n++ {
		held[n%len(held)]++
	}
	block()
	runtime.KeepAlive(held)
	return 0
}

func oom() {
	fmt.Println("app: allocating")
	var held [][]byte
	for range 4096 {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		held = append(held, b)
	}
	fmt.Printf("app: %d MiB allocated and not killed\n", len(held))
}

// exists reports whether path can be stat'ed.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// show handles "show [ARG...]": one line per fact, "arg: ", "env: K=V",
// "uid: ", "gid: ", "capeff: " and "file: PATH: CONTENT" (newlines in the
// content as \n, "<missing>" when unreadable), then watches the files.
func show(args []string) {
	for _, a := range args {
		fmt.Printf("arg: %s\n", a)
	}
	env := os.Environ()
	slices.Sort(env)
	for _, e := range env {
		fmt.Printf("env: %s\n", e)
	}
	fmt.Printf("uid: %d\ngid: %d\ncapeff: %s\n", os.Getuid(), os.Getgid(), capEff())
	var files []string
	if v := os.Getenv("SHOW_FILES"); v != "" {
		files = strings.Split(v, ":")
	}
	seen := map[string]string{}
	for {
		for _, f := range files {
			if c := fileContent(f); c != seen[f] {
				seen[f] = c
				fmt.Printf("file: %s: %s\n", f, c)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fileContent is path's content with newlines escaped, or "<missing>".
func fileContent(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<missing>"
	}
	return strings.ReplaceAll(string(b), "\n", "\\n")
}

// capEff is the CapEff line of /proc/self/status.
func capEff() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
