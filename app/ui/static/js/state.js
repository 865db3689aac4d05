// Who the caller is (GET /v1/whoami), shared by the pages.
export const state = { me: null, canWrite: false };
