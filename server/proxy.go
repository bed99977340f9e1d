package server

import (
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
)

// ProxyStore is the store the /v1/proxy endpoints serve: the root store
// contract, machine IDs and named segment sequences.
type ProxyStore interface {
	machine.Distributor
	Segment(name string) (segment.Distributor, error)
}

func (s *Server) proxyRoutes() {}
