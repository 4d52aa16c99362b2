/** A run's status as a badge, in the words of someone who pressed Cancel (the Threads and Runs tabs). */
import type { Run } from '@langchain/langgraph-sdk';
import { Badge, type Tone } from '../../components/ui';

type RunStatus = Run['status'];

const RUN_TONES: Record<RunStatus, Tone> = { pending: 'warn', running: 'busy', success: 'good', error: 'bad', timeout: 'bad', interrupted: 'none' };
/** `interrupted` is the server's word for cancelled. */
const RUN_LABELS: Record<RunStatus, string> = {
  pending: 'queued',
  running: 'running',
  success: 'success',
  error: 'error',
  timeout: 'timed out',
  interrupted: 'cancelled',
};

export function RunStatusBadge({ status }: { status: RunStatus }) {
  return <Badge tone={RUN_TONES[status] ?? 'none'}>{RUN_LABELS[status] ?? status}</Badge>;
}

/** Still to end: it can be cancelled. */
export const unfinished = (run: Pick<Run, 'status'>) => run.status === 'pending' || run.status === 'running';
