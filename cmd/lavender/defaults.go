package main

import (
	"strings"

	"github.com/alecthomas/kong"

	"github.com/lavender-ml/lavender/app"
)

// flagDefaults writes every ${name} of app.FlagVars (the flags' defaults,
// from the constants of the packages that own them) into the model's tags,
// as kong's own interpolation would, before kong interpolates the rest
// (${default}, ${enum}). Given to
// kong as Vars they would cost every command, `phase ping` included, about
// 10 ms and 4.6 MB of garbage at start: kong copies and expands every
// variable again for each of the CLI's few hundred flag values.
func flagDefaults() kong.Option {
	vars := app.FlagVars()
	pairs := make([]string, 0, 2*len(vars))
	for name, value := range vars {
		// kong reads the result again: "$$" is its escaped "$".
		pairs = append(pairs, "${"+name+"}", strings.ReplaceAll(value, "$", "$$"))
	}
	expand := strings.NewReplacer(pairs...).Replace
	return kong.PostBuild(func(k *kong.Kong) error {
		return kong.Visit(k.Model.Node, func(v kong.Visitable, next kong.Next) error {
			switch v := v.(type) {
			case *kong.Node:
				v.Help = expand(v.Help)
			case *kong.Value:
				v.Default, v.Enum, v.Help = expand(v.Default), expand(v.Enum), expand(v.Help)
				for i, env := range v.Tag.Envs {
					v.Tag.Envs[i] = expand(env)
				}
				if v.Flag != nil {
					v.Flag.PlaceHolder = expand(v.Flag.PlaceHolder)
				}
			}
			return next(nil)
		})
	})
}
