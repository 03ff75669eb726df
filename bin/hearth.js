#!/usr/bin/env node
// Entry point of the `hearth` command: runs the compiled CLI.
import "../dist/cli/index.js";
