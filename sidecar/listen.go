package sidecar

import (
	"net"
	"sync"
	"time"
)

// Connection limits of the sidecar's HTTP server; ServeOptions overrides each when set.
const (
	defaultReadHeaderTimeout = 10 * time.Second // a client has this long to send its request's header
	defaultIdleTimeout       = 60 * time.Second // a keep-alive connection with no request is closed after this
	defaultMaxConns          = 64               // connections open at once; more wait to be accepted
)

// limitListener accepts at most n connections at once: Accept waits while n are open, so idle or
// hostile clients cannot take every file descriptor (the timeouts then free their slots).
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
