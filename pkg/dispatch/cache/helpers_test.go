package cache_test

import "github.com/snavio/snavio/pkg/dispatch/registry"

type aclKey registry.ACLKey

func (k aclKey) id() registry.ID { return registry.ACLID(k.Source, k.Target, k.Command) }
