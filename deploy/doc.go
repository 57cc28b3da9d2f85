// Package deploy holds no code: it is the home of Spillway's deployment
// files (deploy/Dockerfile, deploy/compose, deploy/kubernetes, deploy/local)
// and of the test that checks them without Docker or a cluster: every
// manifest parses, the Deployment and StatefulSet carry what production
// needs, the pieces point at each other correctly, every flag a config file
// names exists in `spillway serve -h`, and the shipped policy passes
// `opa check` and `opa test`.
package deploy
