#!/usr/bin/env node
import { main } from './index.js';

const code = await main(process.argv);
// `serve` returns after shutdown; other commands may leave pools or timers open.
process.exit(code);
