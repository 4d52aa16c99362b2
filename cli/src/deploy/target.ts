/**
 * Which deployment a command means. `berth deploy` names it `--name`, else after the project
 * folder; `deploy revisions | logs | delete` take the same, or a name or id as their argument, or
 * `--deployment-id`: one resolver, so every subcommand accepts every way.
 */
import { basename } from 'node:path';
import { isDeploymentName, toDeploymentName } from '@berth/ids';
import { CliError, GatewayHttpError } from '../client.js';
import type { Deployment, DeploymentsApi } from './api.js';

/** The deployment name `berth deploy` uses: --name as given (checked), else the folder's name normalised. */
export function deploymentName(flag: string | undefined, dir: string): string {
  if (flag !== undefined) {
    if (!isDeploymentName(flag)) {
      throw new CliError(`--name must be lower-case letters, digits and - (at most 63, not starting with -), e.g. ${toDeploymentName(flag) ?? 'my-agent'}`);
    }
    return flag;
  }
  const name = toDeploymentName(basename(dir));
  if (!name) throw new CliError(`cannot make a deployment name from the folder name ${JSON.stringify(basename(dir))}: pass --name`);
  return name;
}

/** How a `deploy` subcommand was told which deployment: at most one of these; none means the folder's. */
export interface DeploymentRef {
  /** The argument: a deployment name, else an id. */
  deployment?: string;
  /** `--name`: a deployment name only. */
  name?: string;
  /** `--deployment-id`: an id only. */
  deploymentId?: string;
}

const LIST_HINT = '`berth deploy list` shows your deployments';

/** The deployment `ref` names, looked up through the gateway; a CliError saying what was not found. */
export async function resolveDeployment(api: DeploymentsApi, ref: DeploymentRef, cwd: string): Promise<Deployment> {
  const given = [ref.deployment && 'an argument', ref.name && '--name', ref.deploymentId && '--deployment-id'].filter(Boolean);
  if (given.length > 1) throw new CliError(`name the deployment once: ${given.join(' and ')} were given`);
  if (ref.deployment) return (await api.findByName(ref.deployment)) ?? byId(api, ref.deployment, `no deployment named ${ref.deployment} or with that id`);
  if (ref.deploymentId) return byId(api, ref.deploymentId, `no deployment with id ${ref.deploymentId}`);
  if (ref.name) {
    const named = await api.findByName(ref.name);
    if (!named) throw new CliError(`no deployment named ${ref.name} (${LIST_HINT})`);
    return named;
  }
  const folder = toDeploymentName(basename(cwd));
  const named = folder ? await api.findByName(folder) : undefined;
  if (!named) {
    const which = folder ? `no deployment named ${folder} (this folder's deployment)` : `${JSON.stringify(basename(cwd))} is no deployment name`;
    throw new CliError(`${which}: give a deployment name or id (${LIST_HINT})`);
  }
  return named;
}

async function byId(api: DeploymentsApi, id: string, notFound: string): Promise<Deployment> {
  try {
    return await api.get(id);
  } catch (error) {
    throw error instanceof GatewayHttpError && error.status === 404 ? new CliError(`${notFound} (${LIST_HINT})`) : error;
  }
}
