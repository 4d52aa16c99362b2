/**
 * The control plane's config as the CLI starts it (`berth up`, `berth serve`, `berth serve --service
 * control-plane`): what its loader reads from the environment, and the agent server program its
 * local deployer runs. The control plane does not import the agent runtime; the CLI installs both
 * and names the one to the other.
 */
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { loadControlPlaneConfig, type ControlPlaneConfig } from '@berth/control-plane';

export function controlPlaneConfig(env: Readonly<Record<string, string | undefined>>): ControlPlaneConfig {
  const config = loadControlPlaneConfig(env);
  return config.deployments ? { ...config, deployments: { ...config.deployments, agentServeScript: AGENT_SERVE_SCRIPT } } : config;
}
