"""The part of the reference's GraphQL schema odfd serves, in SDL: the reference's type, field,
argument and enum names, nullability and page-based connections, for the fields built here
(``docs/graphql.md``); a field not listed is refused by validation with its name. One addition:
``DatasetData.estimatedSizeBytes``, the name kamu-cli's remote search asks for. Of the
mutations, ``auth``'s sign-in (``odfd.server.graphql.auth``) and ``datasets``' create, rename,
delete and visibility (``odfd.server.graphql.datasets``); data is written through the transfer
protocols, ``/ingest`` and ``odfd``."""

SDL = """
schema { query: Query mutation: Mutation }

scalar AccountID
scalar AccountName
scalar AccountDisplayName
scalar DatasetAlias
scalar DatasetID
scalar DatasetName
scalar DatasetRef
scalar DateTime
scalar Multihash

type Query {
  apiVersion: String!
  datasets: Datasets!
  accounts: Accounts!
  search: Search!
  data: DataQueries!
}

type Mutation {
  auth: AuthMut!
  datasets: DatasetsMut!
}

type DatasetsMut {
  byId(datasetId: DatasetID!): DatasetMut
  createEmpty(
    datasetKind: DatasetKind!, datasetAlias: DatasetAlias!, datasetVisibility: DatasetVisibility!
  ): CreateDatasetResult!
  createFromSnapshot(
    snapshot: String!, snapshotFormat: MetadataManifestFormat!,
    datasetVisibility: DatasetVisibility!
  ): CreateDatasetFromSnapshotResult!
}

type DatasetMut {
  dataset: Dataset!
  rename(newName: DatasetName!): RenameResult!
  delete: DeleteResult!
  setVisibility(visibility: DatasetVisibilityInput!): SetDatasetVisibilityResult!
}

enum DatasetVisibility { PRIVATE PUBLIC }
enum MetadataManifestFormat { YAML }

input PrivateDatasetVisibilityInput { dummy: String }
input PublicDatasetVisibilityInput { anonymousAvailable: Boolean! }
input DatasetVisibilityInput @oneOf {
  private: PrivateDatasetVisibilityInput
  public: PublicDatasetVisibilityInput
}

interface CreateDatasetResult { isSuccess: Boolean! message: String! }
interface CreateDatasetFromSnapshotResult { isSuccess: Boolean! message: String! }

type CreateDatasetResultSuccess implements CreateDatasetResult & CreateDatasetFromSnapshotResult {
  dataset: Dataset!
  isSuccess: Boolean!
  message: String!
}

type CreateDatasetResultNameCollision implements CreateDatasetResult
    & CreateDatasetFromSnapshotResult {
  accountName: AccountName
  datasetName: DatasetName!
  isSuccess: Boolean!
  message: String!
}

type CreateDatasetResultInvalidSnapshot implements CreateDatasetFromSnapshotResult {
  message: String!
  isSuccess: Boolean!
}

type CreateDatasetResultMissingInputs implements CreateDatasetFromSnapshotResult {
  missingInputs: [String!]!
  isSuccess: Boolean!
  message: String!
}

type MetadataManifestMalformed implements CreateDatasetFromSnapshotResult {
  message: String!
  isSuccess: Boolean!
}

interface RenameResult { message: String! }
type RenameResultSuccess implements RenameResult {
  oldName: DatasetName!
  newName: DatasetName!
  message: String!
}
type RenameResultNoChanges implements RenameResult { preservedName: DatasetName! message: String! }
type RenameResultNameCollision implements RenameResult {
  collidingAlias: DatasetAlias!
  message: String!
}

interface DeleteResult { message: String! }
type DeleteResultSuccess implements DeleteResult { deletedDataset: DatasetAlias! message: String! }
type DeleteResultDanglingReference implements DeleteResult {
  notDeletedDataset: DatasetAlias!
  danglingChildRefs: [DatasetRef!]!
  message: String!
}

interface SetDatasetVisibilityResult { message: String! }
type SetDatasetVisibilityResultSuccess implements SetDatasetVisibilityResult { message: String! }

enum AccountProvider { PASSWORD OAUTH_GITHUB WEB3_WALLET }

type AuthMut {
  login(loginMethod: AccountProvider!, loginCredentialsJson: String!): LoginResponse!
  accountDetails(accessToken: String!): Account!
}

type LoginResponse {
  accessToken: String!
  account: Account!
}

type Datasets {
  byId(datasetId: DatasetID!): Dataset
  byOwnerAndName(accountName: AccountName!, datasetName: DatasetName!): Dataset
  byAccountId(accountId: AccountID!, page: Int, perPage: Int): DatasetConnection!
  byAccountName(accountName: AccountName!, page: Int, perPage: Int): DatasetConnection!
}

type Accounts {
  byId(accountId: AccountID!): Account
  byName(name: AccountName!): Account
}

enum AccountType { USER ORGANIZATION }

type Account {
  id: AccountID!
  accountName: AccountName!
  displayName: AccountDisplayName!
  accountType: AccountType!
  avatarUrl: String
  isAdmin: Boolean!
}

type Search {
  query(query: String!, page: Int, perPage: Int): SearchResultConnection!
}

union SearchResult = Dataset

type PageBasedInfo {
  hasPreviousPage: Boolean!
  hasNextPage: Boolean!
  currentPage: Int!
  totalPages: Int
}

type SearchResultConnection {
  nodes: [SearchResult!]!
  totalCount: Int!
  pageInfo: PageBasedInfo!
  edges: [SearchResultEdge!]!
}

type SearchResultEdge { node: SearchResult! }

type DatasetConnection {
  nodes: [Dataset!]!
  totalCount: Int!
  pageInfo: PageBasedInfo!
  edges: [DatasetEdge!]!
}

type DatasetEdge { node: Dataset! }

enum DatasetKind { ROOT DERIVATIVE }

type PrivateDatasetVisibility { dummy: String }
type PublicDatasetVisibility { anonymousAvailable: Boolean! }
union DatasetVisibilityOutput = PrivateDatasetVisibility | PublicDatasetVisibility

type Dataset {
  id: DatasetID!
  name: DatasetName!
  owner: Account!
  alias: DatasetAlias!
  kind: DatasetKind!
  visibility: DatasetVisibilityOutput!
  head: Multihash!
  data: DatasetData!
  metadata: DatasetMetadata!
  createdAt: DateTime!
  lastUpdatedAt: DateTime!
  permissions: DatasetPermissions!
  role: DatasetAccessRole
  flows: DatasetFlows!
}

enum DatasetAccessRole { READER EDITOR MAINTAINER }

type DatasetPermissions {
  collaboration: DatasetCollaborationPermissions!
  envVars: DatasetEnvVarsPermissions!
  flows: DatasetFlowsPermissions!
  webhooks: DatasetWebhooksPermissions!
  general: DatasetGeneralPermissions!
  metadata: DatasetMetadataPermissions!
}

type DatasetCollaborationPermissions { canView: Boolean! canUpdate: Boolean! }
type DatasetEnvVarsPermissions { canView: Boolean! canUpdate: Boolean! }
type DatasetFlowsPermissions { canView: Boolean! canRun: Boolean! }
type DatasetWebhooksPermissions { canView: Boolean! canUpdate: Boolean! }
type DatasetGeneralPermissions {
  canRename: Boolean!
  canSetVisibility: Boolean!
  canDelete: Boolean!
}
type DatasetMetadataPermissions { canCommit: Boolean! }

enum DataBatchFormat { JSON JSON_AOS JSON_SOA JSON_AOA ND_JSON CSV JSON_LD }
enum DataSchemaFormat { PARQUET PARQUET_JSON ARROW_JSON }
enum QueryDialect { SQL_SPARK SQL_FLINK SQL_DATA_FUSION SQL_RISING_WAVE }

type DataSchema {
  format: DataSchemaFormat!
  content: String!
}

type DataBatch {
  format: DataBatchFormat!
  content: String!
  numRecords: Int!
}

type DatasetState {
  id: DatasetID!
  alias: String!
  blockHash: Multihash
}

type DataQueryResultSuccess {
  schema: DataSchema!
  data: DataBatch!
  datasets: [DatasetState!]!
  limit: Int!
}

enum DataQueryResultErrorKind { INVALID_SQL }

type DataQueryResultError {
  errorMessage: String!
  errorKind: DataQueryResultErrorKind!
}

union DataQueryResult = DataQueryResultSuccess | DataQueryResultError

type DataQueries {
  query(
    query: String!, queryDialect: QueryDialect!, dataFormat: DataBatchFormat,
    schemaFormat: DataSchemaFormat, skip: Int, limit: Int
  ): DataQueryResult!
}

type DatasetData {
  numRecordsTotal: Int!
  estimatedSize: Int!
  estimatedSizeBytes: Int!
  tail(skip: Int, limit: Int, dataFormat: DataBatchFormat, schemaFormat: DataSchemaFormat):
    DataQueryResult!
}

type DatasetMetadata {
  chain: MetadataChain!
  currentWatermark: DateTime
  currentSchema(format: DataSchemaFormat): DataSchema
  currentUpstreamDependencies: [DependencyDatasetResult!]!
  currentDownstreamDependencies: [DependencyDatasetResult!]!
  currentPollingSource: SetPollingSource
  currentPushSources: [AddPushSource!]!
  currentTransform: SetTransform
  currentInfo: SetInfo!
  currentReadme: String
  currentLicense: SetLicense
  currentVocab: SetVocab
}

interface DependencyDatasetResult { message: String! }

type DependencyDatasetResultAccessible implements DependencyDatasetResult {
  dataset: Dataset!
  message: String!
}

type DependencyDatasetResultNotAccessible implements DependencyDatasetResult {
  id: DatasetID!
  message: String!
}

type BlockRef {
  name: String!
  blockHash: Multihash!
}

type MetadataChain {
  refs: [BlockRef!]!
  blockByHash(hash: Multihash!): MetadataBlockExtended
  blocks(page: Int, perPage: Int): MetadataBlockConnection!
}

type MetadataBlockConnection {
  nodes: [MetadataBlockExtended!]!
  totalCount: Int!
  pageInfo: PageBasedInfo!
  edges: [MetadataBlockEdge!]!
}

type MetadataBlockEdge { node: MetadataBlockExtended! }

type MetadataBlockExtended {
  blockHash: Multihash!
  prevBlockHash: Multihash
  systemTime: DateTime!
  event: MetadataEvent!
  sequenceNumber: Int!
}

union MetadataEvent = AddData | ExecuteTransform | Seed | SetPollingSource | SetTransform
  | SetVocab | SetAttachments | SetInfo | SetLicense | SetDataSchema | AddPushSource
  | DisablePushSource | DisablePollingSource

type OffsetInterval { start: Int! end: Int! }

type DataSlice {
  logicalHash: Multihash!
  physicalHash: Multihash!
  offsetInterval: OffsetInterval!
  size: Int!
}

type Checkpoint { physicalHash: Multihash! size: Int! }

type AddData {
  prevCheckpoint: Multihash
  prevOffset: Int
  newData: DataSlice
  newCheckpoint: Checkpoint
  newWatermark: DateTime
}

type ExecuteTransform {
  prevCheckpoint: Multihash
  prevOffset: Int
  newData: DataSlice
  newCheckpoint: Checkpoint
  newWatermark: DateTime
}

type Seed { datasetId: DatasetID! datasetKind: DatasetKind! }

type SqlQueryStep { alias: String query: String! }
type TransformSql { engine: String! version: String queries: [SqlQueryStep!]! }
union Transform = TransformSql

type SetPollingSource { preprocess: Transform }
type AddPushSource { sourceName: String! preprocess: Transform }
type DisablePushSource { sourceName: String! }
type DisablePollingSource { dummy: String }
type SetTransform { transform: Transform! }

type SetVocab {
  offsetColumn: String
  operationTypeColumn: String
  systemTimeColumn: String
  eventTimeColumn: String
}

type AttachmentEmbedded { path: String! content: String! }
type AttachmentsEmbedded { items: [AttachmentEmbedded!]! }
union Attachments = AttachmentsEmbedded
type SetAttachments { attachments: Attachments! }

type SetInfo { description: String keywords: [String!] }

type SetLicense { shortName: String! name: String! spdxId: String websiteUrl: String! }

type SetDataSchema { schema: DataSchema! }

type DatasetFlows {
  configs: DatasetFlowConfigs!
  triggers: DatasetFlowTriggers!
  runs: DatasetFlowRuns!
}
enum DatasetFlowType { INGEST EXECUTE_TRANSFORM HARD_COMPACTION RESET RESET_TO_METADATA }
type DatasetFlowConfigs { byType(datasetFlowType: DatasetFlowType!): FlowConfiguration }
type FlowConfiguration { rule: FlowConfigRule! retryPolicy: FlowRetryPolicy }
type FlowConfigRuleCompaction { maxSliceSize: Int! maxSliceRecords: Int! }
type FlowConfigRuleIngest { fetchUncacheable: Boolean! fetchNextIteration: Boolean! }
union FlowConfigRule = FlowConfigRuleIngest | FlowConfigRuleCompaction
enum FlowRetryBackoffType { FIXED LINEAR EXPONENTIAL EXPONENTIAL_WITH_JITTER }
type FlowRetryPolicy {
  maxAttempts: Int!
  minDelay: TimeDelta!
  backoffType: FlowRetryBackoffType!
}
type DatasetFlowTriggers { byType(datasetFlowType: DatasetFlowType!): FlowTrigger }
type FlowTrigger {
  paused: Boolean!
  schedule: FlowTriggerScheduleRule
  reactive: FlowTriggerReactiveRule
  stopPolicy: FlowTriggerStopPolicy!
}
enum TimeUnit { MINUTES HOURS DAYS WEEKS }
type TimeDelta { every: Int! unit: TimeUnit! }
type Cron5ComponentExpression { cron5ComponentExpression: String! }
union FlowTriggerScheduleRule = TimeDelta | Cron5ComponentExpression
enum FlowTriggerBreakingChangeRule { NO_ACTION RECOVER }
type FlowTriggerReactiveRule {
  forNewData: FlowTriggerBatchingRule!
  forBreakingChange: FlowTriggerBreakingChangeRule!
}
type FlowTriggerBatchingRuleImmediate { dummy: Boolean! }
type FlowTriggerBatchingRuleBuffering { minRecordsToAwait: Int! maxBatchingInterval: TimeDelta! }
union FlowTriggerBatchingRule = FlowTriggerBatchingRuleImmediate | FlowTriggerBatchingRuleBuffering
type FlowTriggerStopPolicyNever { dummy: Boolean! }
type FlowTriggerStopPolicyAfterConsecutiveFailures { maxFailures: Int! }
union FlowTriggerStopPolicy = FlowTriggerStopPolicyNever | FlowTriggerStopPolicyAfterConsecutiveFailures
type DatasetFlowRuns {
  getFlow(flowId: FlowID!): GetFlowResult!
  listFlows(page: Int, perPage: Int, filters: DatasetFlowFilters): FlowConnection!
}
scalar FlowID
input DatasetFlowFilters { byStatus: [FlowStatus!] byInitiator: InitiatorFilterInput }
input InitiatorFilterInput @oneOf { system: Boolean accounts: [AccountID!] }
enum FlowStatus { WAITING RUNNING RETRYING FINISHED }
type FlowConnection {
  nodes: [Flow!]!
  totalCount: Int!
  pageInfo: PageBasedInfo!
  edges: [FlowEdge!]!
}
type FlowEdge { node: Flow! }
type Flow {
  flowId: FlowID!
  datasetId: DatasetID
  description: FlowDescription!
  status: FlowStatus!
  outcome: FlowOutcome
  timing: FlowTimingRecords!
  initiator: Account
}
type FlowDescriptionUnknown { message: String! }
union FlowDescription = FlowDescriptionUnknown
type FlowSuccessResult { message: String! }
type FlowFailedError { reason: TaskFailureReason! }
type FlowAbortedResult { message: String! }
union FlowOutcome = FlowSuccessResult | FlowFailedError | FlowAbortedResult
type TaskFailureReasonGeneral { message: String! recoverable: Boolean! }
union TaskFailureReason = TaskFailureReasonGeneral
type FlowTimingRecords {
  initiatedAt: DateTime!
  firstAttemptScheduledAt: DateTime
  scheduledAt: DateTime
  awaitingExecutorSince: DateTime
  runningSince: DateTime
  lastAttemptFinishedAt: DateTime
  completedAt: DateTime
}
interface GetFlowResult { message: String! }
type GetFlowSuccess implements GetFlowResult { flow: Flow! message: String! }
type FlowNotFound implements GetFlowResult { flowId: FlowID! message: String! }
"""
