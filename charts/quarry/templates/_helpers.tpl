{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "quarry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: <release>-quarry, or the release name when it already contains the chart name. */}}
{{- define "quarry.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "quarry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "quarry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: quarry
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "operator"). */}}
{{- define "quarry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quarry.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "quarry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "quarry.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "quarry.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Redis URL required by workers. */}}
{{- define "quarry.redisConfigured" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret.name -}}true{{- end -}}
{{- end -}}

{{/* QUARRY_REDIS_URL, from the Secret or the value; nothing without Redis. */}}
{{- define "quarry.redisEnv" -}}
{{- if .Values.redis.existingSecret.name }}
- name: QUARRY_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret.name }}
      key: {{ .Values.redis.existingSecret.key }}
{{- else if .Values.redis.url }}
- name: QUARRY_REDIS_URL
  value: {{ .Values.redis.url | quote }}
{{- end }}
{{- end -}}

{{/* The Secret holding the key the operator seals runs' API keys with for the workers. */}}
{{- define "quarry.sealingKeySecret" -}}
{{- .Values.workers.sealingKey.existingSecret | default (printf "%s-sealing-key" (include "quarry.fullname" .)) -}}
{{- end -}}

{{/* Where the operator and the workers read the sealing key: a file, not an API call. */}}
{{- define "quarry.sealingKeyEnv" -}}
- name: QUARRY_SEALING_KEY_FILE
  value: /etc/quarry/sealing/{{ .Values.workers.sealingKey.key }}
{{- end -}}

{{- define "quarry.sealingKeyMount" -}}
- name: sealing-key
  mountPath: /etc/quarry/sealing
  readOnly: true
{{- end -}}

{{- define "quarry.sealingKeyVolume" -}}
- name: sealing-key
  secret:
    secretName: {{ include "quarry.sealingKeySecret" . }}
    items:
      - key: {{ .Values.workers.sealingKey.key }}
        path: {{ .Values.workers.sealingKey.key }}
    # 0440 (decimal, as every YAML parser reads it alike): the pods' group (fsGroup) reads it.
    defaultMode: 288
{{- end -}}

{{/* The container security context every Quarry container runs with (not configurable). */}}
{{- define "quarry.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "quarry.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Probes on the HTTP port: /livez (the process serves) and /readyz (caches synced). */}}
{{- define "quarry.probes" -}}
livenessProbe:
  httpGet:
    path: /livez
    port: http
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
startupProbe:
  httpGet:
    path: /livez
    port: http
  periodSeconds: 2
  failureThreshold: 30
{{- end -}}
