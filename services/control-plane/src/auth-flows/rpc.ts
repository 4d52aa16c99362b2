/**
 * The gRPC face of {@link AuthFlows}: `berth.controlplane.v1.AuthFlowService`.
 */
import { InvalidArgumentError } from '@berth/errors';
import { AuthFlowService, AuthFlowStatus, timestampFromDate, WaitStatus } from '@berth/proto';
import type { ServiceImplementation } from '@berth/rpc';
import type { AuthFlows, WaitOutcome } from './service.js';
import type { FlowRecord, FlowStatus } from './store.js';

const flowStatus: Record<FlowStatus, AuthFlowStatus> = {
  pending: AuthFlowStatus.PENDING,
  completed: AuthFlowStatus.COMPLETED,
  expired: AuthFlowStatus.EXPIRED,
};

const waitStatus: Record<WaitOutcome['status'], WaitStatus> = {
  completed: WaitStatus.COMPLETED,
  pending: WaitStatus.PENDING,
  timeout: WaitStatus.TIMEOUT,
  not_found: WaitStatus.NOT_FOUND,
};

function flowMessage(flow: FlowRecord) {
  return {
    status: flowStatus[flow.status],
    createdAt: timestampFromDate(flow.createdAt),
    expiresAt: timestampFromDate(flow.expiresAt),
    ...(flow.completedAt ? { completedAt: timestampFromDate(flow.completedAt) } : {}),
    clientName: flow.clientName,
    tenantId: flow.tenantId ?? '',
    tokenClaimed: flow.tokenClaimed,
  };
}

export function authFlowHandlers(flows: AuthFlows): ServiceImplementation<typeof AuthFlowService> {
  return {
    startFlow: async (request) => {
      const { authId, approvalId, flow } = await flows.start({ ttlSeconds: request.ttlSeconds, clientName: request.clientName });
      return { authId, approvalId, flow: flowMessage(flow) };
    },
    getFlow: async (request) => {
      const id = request.id;
      if (id.case === 'authId') return { flow: flowMessage(await flows.get({ authId: id.value })) };
      if (id.case === 'approvalId') return { flow: flowMessage(await flows.get({ approvalId: id.value })) };
      throw new InvalidArgumentError('GetFlow needs an auth_id or an approval_id');
    },
    completeFlow: async (request) => ({
      flow: flowMessage(await flows.complete({ approvalId: request.approvalId, token: request.token, tenantId: request.tenantId })),
    }),
    wait: async (request, context) => {
      const outcome = await flows.wait(request.authId, request.timeoutMs, context.signal);
      return { status: waitStatus[outcome.status], ...('token' in outcome && outcome.token ? { token: outcome.token } : {}) };
    },
  };
}
