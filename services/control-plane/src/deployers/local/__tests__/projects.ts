/**
 * Test support: LangGraph.js project folders for real agent server processes, whose node_modules
 * is the repository's (nothing to install).
 */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RevisionArtifact } from '../../deployer.js';

const repoModules = fileURLToPath(new URL('../../../../../../node_modules', import.meta.url));

/** Makes project folders under `work`: `files` maps paths to contents beside a package.json. */
export function projectMaker(work: string): (files: Record<string, string>) => Promise<RevisionArtifact & { kind: 'directory' }> {
  let count = 0;
  return async (files) => {
    const dir = join(work, `project-${(count += 1)}`);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name: `p${count}`, type: 'module' }));
    for (const [path, body] of Object.entries(files)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), body);
    }
    await symlink(repoModules, join(dir, 'node_modules'));
    return { kind: 'directory', path: dir, configPath: 'langgraph.json' };
  };
}

/** A project with one graph `agent` whose module is `graph`. */
export function oneGraph(graph: string): Record<string, string> {
  return { 'langgraph.json': JSON.stringify({ graphs: { agent: './src/graph.ts:graph' } }), 'src/graph.ts': graph };
}
