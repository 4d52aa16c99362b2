/**
 * Starts the JS LangGraph server (`@langchain/langgraph-api` 1.5, the reference implementation of
 * protocol v2) on a test project, in its own process (its storage and logger are module globals).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnTestChild, type TestChild } from '@berth/testing';

const serverScript = fileURLToPath(new URL('./js-server-process.ts', import.meta.url));
/** tsx's loader by path: the server runs in its scratch dir, from where `tsx` does not resolve. */
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface RunningJsServer {
  url: string;
  /** Stops it and removes its scratch dir. */
  stop(): Promise<void>;
}

/** The JS server on the project of `configPath`, on 127.0.0.1 and a free port; resolves once it serves. */
export async function spawnJsServer(configPath: string): Promise<RunningJsServer> {
  const scratch = mkdtempSync(join(tmpdir(), 'js-server-'));
  // Errors only: it logs every request at debug. No LangSmith tracing (the machine has no internet).
  const env = { ...process.env, LOG_LEVEL: 'error', LANGSMITH_TRACING: 'false', LANGCHAIN_TRACING_V2: 'false' };
  const started: TestChild = spawnTestChild(process.execPath, ['--import', tsx, serverScript, configPath, scratch], { env, cwd: scratch });
  const stop = async () => {
    await started.stop();
    rmSync(scratch, { recursive: true, force: true });
  };
  try {
    const [, url] = await started.waitForOutput(/ready (\S+)/);
    return { url: url!, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
