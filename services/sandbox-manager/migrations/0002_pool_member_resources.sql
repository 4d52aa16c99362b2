-- What a warm-pool member was made with, so that a tenant's quota counts it (members are running
-- containers of the tenant's). Members made before this migration count as 0 until replaced.
ALTER TABLE pool_members
  ADD COLUMN vcpus double precision NOT NULL DEFAULT 0,
  ADD COLUMN mem_bytes bigint NOT NULL DEFAULT 0;
