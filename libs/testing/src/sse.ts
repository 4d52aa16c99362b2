/** The SSE reader of @berth/http, for tests (one parser for the CLI, the tests and the platform). */
export { sseFrames, type SseFrame } from '@berth/http';
