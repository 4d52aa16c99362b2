/**
 * The JS LangGraph server (`@langchain/langgraph-api`, what `langgraphjs dev` runs) in its own
 * process, for comparing Berth's protocol v2 with it:
 * node --import tsx js-server-process.ts <langgraph.json> <scratch dir>.
 * It serves the project's graphs on 127.0.0.1 and a free port, keeps threads, runs and checkpoints in
 * memory (the files it flushes them to go to the scratch dir, not into the project) and prints
 * "ready <url>" once it serves.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { startServer } from '@langchain/langgraph-api/server';

const [configPath, scratch] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath!, 'utf8')) as { graphs: Record<string, string> };
// Graph paths are relative to the project; the server resolves them against its cwd, the scratch dir.
const graphs = Object.fromEntries(Object.entries(config.graphs).map(([id, spec]) => [id, resolve(dirname(configPath!), spec)]));
const { host } = await startServer({ port: 0, nWorkers: 4, host: '127.0.0.1', cwd: scratch!, graphs });
process.stdout.write(`ready http://${host}\n`);
