/**
 * `berth deploy`: deploy the LangGraph project in the current directory. The deployment is found
 * by its exact name; a new one is created (its first revision waits for the upload), an existing
 * one gets a new revision from the upload. Then the revision is followed — status changes and
 * build/deploy log lines as they come — until it is DEPLOYED (the deployment URL is printed) or
 * fails (the last log lines are printed and the exit code is 1).
 */
import { CliError } from '../client.js';
import { gatewayClient, type ConnectionFlags } from '../connection.js';
import type { CliEnv } from '../env.js';
import { DeploymentsApi, type Deployment, type Secret } from '../deploy/api.js';
import { formatLog } from '../deploy/log-line.js';
import { packProject, type PackedProject } from '../deploy/pack.js';
import { formatBytes, Reporter, watchRevision, type WatchOutcome } from '../deploy/progress.js';
import { loadProject, secretsFromEnv, type Project } from '../deploy/project.js';
import { deploymentName } from '../deploy/target.js';

type Print = (line: string) => void;

export interface DeployFlags extends ConnectionFlags {
  name?: string;
  deploymentType?: 'dev' | 'prod';
  /** Path of langgraph.json. @default 'langgraph.json' */
  config?: string;
  /** `--no-wait` sets it false. @default true */
  wait?: boolean;
  json?: boolean;
  /** Seconds to follow the revision before giving up (checked by its flag parser). @default 900 */
  timeout?: number;
  /** Milliseconds between polls (tests). @default 1000 */
  pollMs?: number;
}

export interface DeployOutcome {
  deployment: Deployment;
  revisionId: string;
  status: 'succeeded' | 'failed' | 'timed_out' | 'submitted';
}

export async function deploy(env: CliEnv, flags: DeployFlags, print: Print, cwd: string = process.cwd()): Promise<DeployOutcome> {
  const reporter = new Reporter(flags.json === true, print);
  const timeoutSeconds = flags.timeout ?? 900;
  const project = await loadProject(cwd, flags.config ?? 'langgraph.json');
  const name = deploymentName(flags.name, project.dir);
  const api = new DeploymentsApi(await gatewayClient(env, flags, project.env));
  const { secrets, skipped } = secretsFromEnv(project.env);
  if (skipped.length) reporter.note(`not sent as secrets (the platform's own settings, or not variable names): ${skipped.join(', ')}`);
  if (secrets.length) reporter.step(`Secrets from ${project.envSource}: ${secrets.map((s) => s.name).join(', ')}`);

  let packed: PackedProject | undefined;
  try {
    // Ask the gateway before packing: a wrong key or host should not wait for a big tarball.
    const existing = await api.findByName(name);
    packed = await pack(project, reporter);
    const { deployment, revisionId } = existing
      ? await updateExisting(api, existing, project, packed, secrets, flags, reporter)
      : await createNew(api, name, project, packed, secrets, flags, reporter);

    if (flags.wait === false) {
      reporter.emit({ type: 'result', status: 'submitted', deployment_id: deployment.id, revision_id: revisionId, deployment_url: deployment.deployment_url });
      if (!reporter.json) {
        print(`Revision ${revisionId} of ${name} is on its way; follow it with \`${followCommand(name, flags)}\`.`);
        print(`It will answer at ${deployment.deployment_url}`);
      }
      return { deployment, revisionId, status: 'submitted' };
    }
    reporter.step(`Waiting for revision ${revisionId} to deploy (Ctrl-C stops waiting; the deployment goes on)...`);
    const outcome = await watchRevision(api, deployment.id, revisionId, reporter, {
      timeoutMs: timeoutSeconds * 1000,
      ...(flags.pollMs ? { pollMs: flags.pollMs } : {}),
    });
    return finish(deployment, revisionId, outcome, reporter, print, { timeoutSeconds, follow: followCommand(name, flags) });
  } finally {
    await packed?.dispose();
  }
}

async function pack(project: Project, reporter: Reporter): Promise<PackedProject> {
  const packed = await packProject(project.dir);
  reporter.step(`Packed ${packed.fileCount} files of ${project.dir} (${formatBytes(packed.bytes)})`);
  for (const skipped of packed.skipped) reporter.note(`left out ${skipped.path}: ${skipped.reason}`);
  return packed;
}

async function upload(api: DeploymentsApi, deployment: Deployment, packed: PackedProject, reporter: Reporter) {
  reporter.step(`Uploading ${formatBytes(packed.bytes)}...`);
  const started = Date.now();
  const uploaded = await api.upload(deployment.id, packed.file, packed.bytes, (bytes) =>
    reporter.emit({ type: 'upload_progress', bytes, total: packed.bytes }),
  );
  reporter.step(`Uploaded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return uploaded;
}

async function createNew(
  api: DeploymentsApi,
  name: string,
  project: Project,
  packed: PackedProject,
  secrets: Secret[],
  flags: DeployFlags,
  reporter: Reporter,
): Promise<{ deployment: Deployment; revisionId: string }> {
  const deploymentType = flags.deploymentType ?? 'dev';
  reporter.step(`Creating deployment ${name} (${deploymentType})`);
  let deployment = await api.create({
    name,
    source: 'internal_source',
    source_config: { deployment_type: deploymentType },
    source_revision_config: { langgraph_config_path: project.configPath },
    secrets,
  });
  const uploaded = await upload(api, deployment, packed, reporter);
  if (uploaded.revision_id) return { deployment, revisionId: uploaded.revision_id };
  // The first revision did not wait for this upload (it was given up on, say): make one from it.
  deployment = await api.update(deployment.id, {
    source_revision_config: { langgraph_config_path: project.configPath, source_tarball_path: uploaded.object_path },
  });
  return { deployment, revisionId: deployment.latest_revision_id! };
}

async function updateExisting(
  api: DeploymentsApi,
  existing: Deployment,
  project: Project,
  packed: PackedProject,
  secrets: Secret[],
  flags: DeployFlags,
  reporter: Reporter,
): Promise<{ deployment: Deployment; revisionId: string }> {
  const currentType = existing.source_config.deployment_type ?? 'dev';
  if (flags.deploymentType && flags.deploymentType !== currentType) {
    reporter.note(`${existing.name} is a ${currentType} deployment; the type is fixed when a deployment is created, so it stays ${currentType}`);
  }
  reporter.step(`Updating deployment ${existing.name} (${existing.id})`);
  const uploaded = await upload(api, existing, packed, reporter);
  // Without an env file the project says nothing about secrets: those set by name (console, API) stay.
  if (!project.envSource && existing.secrets.length) {
    reporter.note(`no .env here: the deployment keeps its secrets (${existing.secrets.map((s) => s.name).join(', ')})`);
  }
  const deployment = await api.update(existing.id, {
    source_revision_config: { langgraph_config_path: project.configPath, source_tarball_path: uploaded.object_path },
    ...(project.envSource ? { secrets } : {}),
  });
  return { deployment, revisionId: deployment.latest_revision_id! };
}

/**
 * The command that follows the deployment's logs from here. The connection is resolved the same
 * way again, so only flags need repeating (a key given as a flag is not printed).
 */
function followCommand(name: string, flags: DeployFlags): string {
  const url = flags.url ?? flags.host;
  return `berth deploy logs --name ${name} --follow${url ? ` --url ${url}` : ''}${flags.apiKey ? ' --api-key <key>' : ''}`;
}

function finish(
  deployment: Deployment,
  revisionId: string,
  outcome: WatchOutcome,
  reporter: Reporter,
  print: Print,
  hint: { timeoutSeconds: number; follow: string },
): DeployOutcome {
  const { revision } = outcome;
  const base = { deployment_id: deployment.id, revision_id: revisionId, deployment_url: deployment.deployment_url, revision_status: revision.status };
  if (revision.status === 'DEPLOYED') {
    reporter.emit({ type: 'result', status: 'succeeded', ...base });
    if (!reporter.json) {
      print('');
      print(`Deployed ${deployment.name}. It answers at:`);
      print(`  ${deployment.deployment_url}`);
      print(`Call it with the LangGraph SDK: new Client({ apiUrl: '${deployment.deployment_url}', apiKey: <your API key> })`);
    }
    return { deployment, revisionId, status: 'succeeded' };
  }
  if (outcome.timedOut) {
    reporter.emit({ type: 'result', status: 'timed_out', ...base, status_message: revision.status_message });
    throw new CliError(`revision ${revisionId} is still ${revision.status} after ${hint.timeoutSeconds} s; it goes on: \`${hint.follow}\``);
  }
  reporter.emit({ type: 'result', status: 'failed', ...base, status_message: revision.status_message });
  if (!reporter.json) {
    print('');
    print(`Revision ${revisionId} ended ${revision.status}${revision.status_message ? `: ${revision.status_message}` : ''}`);
    if (outcome.tail.length) {
      print(`Last ${outcome.tail.length} log lines:`);
      for (const entry of outcome.tail) print(`  ${formatLog(entry)}`);
    }
  }
  throw new CliError(`the deployment of ${deployment.name} failed (${revision.status})`);
}
