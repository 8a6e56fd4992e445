{{/*
Names and labels shared by the templates. Labels are flow mappings ({k: v, ...}) so that
`template` (which cannot be piped into nindent) can put them at any indentation.
*/}}
{{- define "streamline.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "streamline.selectorLabels" -}}
{app.kubernetes.io/name: {{ .Chart.Name }}, app.kubernetes.io/instance: {{ .Release.Name }}}
{{- end -}}

{{- define "streamline.labels" -}}
{app.kubernetes.io/name: {{ .Chart.Name }}, app.kubernetes.io/instance: {{ .Release.Name }}, app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}, app.kubernetes.io/managed-by: {{ .Release.Service }}, helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}}
{{- end -}}
